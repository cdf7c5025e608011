#!/usr/bin/env bash
# Make vLLM's pure-Python types importable on a CPU machine, for tests/vllm (nothing is installed
# into any environment; nothing lands in the repo):
#   /tmp/vllm-src    the unpacked vllm 0.33.0 wheel, without its compiled .so files
#   /tmp/vllm-extra  the small packages vllm.sampling_params / vllm.outputs import
# Then: COEVOLVE_VLLM_SRC=/tmp/vllm-src COEVOLVE_VLLM_EXTRA=/tmp/vllm-extra pytest tests/vllm
set -euo pipefail
py="${PYTHON:-python3}"
src="${COEVOLVE_VLLM_SRC:-/tmp/vllm-src}"
extra="${COEVOLVE_VLLM_EXTRA:-/tmp/vllm-extra}"
wheel_dir="$(mktemp -d)"
"$py" -m pip download --no-deps vllm==0.33.0 -d "$wheel_dir"
mkdir -p "$src"
"$py" - "$wheel_dir" "$src" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/vllm-*.whl")[0]
z = zipfile.ZipFile(wheel)
z.extractall(sys.argv[2], members=[n for n in z.namelist() if not n.endswith(".so")])
PY
"$py" -m pip install --quiet --no-deps --target "$extra" \
  msgspec cbor2 pyzmq openai-harmony pybase64 cachetools uvloop py-cpuinfo prometheus-client
rm -rf "$wheel_dir"
echo "vLLM types ready: COEVOLVE_VLLM_SRC=$src COEVOLVE_VLLM_EXTRA=$extra"
