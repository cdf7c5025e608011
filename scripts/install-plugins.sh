#!/usr/bin/env bash
# Install the core with its extras and every plugin of this repository into the given Python's
# environment, editable. torch must already be installed (pinned) by the caller.
set -euo pipefail
PY=${1:-python}
cd "$(dirname "$0")/.."
# setuptools warns on every editable install that a folder named like the package in the
# working directory could shadow it; here that folder IS the package, so the warning says nothing.
export PYTHONWARNINGS="ignore:Editable installation:UserWarning${PYTHONWARNINGS:+,$PYTHONWARNINGS}"
$PY -m pip install -q -e ".[report,docs,dev]"
$PY -m pip install -q -e examples/plugins/coevolve-kvstore
for p in plugins/coevolve-signals plugins/coevolve-grpo plugins/coevolve-litellm plugins/coevolve-warehouse; do
  [ -f "$p/pyproject.toml" ] && $PY -m pip install -q -e "$p"
done
if [ -f plugins/coevolve-bfcl/pyproject.toml ]; then
  $PY -m pip install -q -e plugins/coevolve-bfcl
  # bfcl-eval's declared dependencies include torch, provider SDKs and sentence-transformers,
  # none of which the multi-turn backends and checker use: install it without them.
  $PY -m coevolve_bfcl.install --quiet
fi
if [ -f plugins/coevolve-appworld/pyproject.toml ]; then
  # the plugin itself is light; AppWorld runs in its own virtualenv (coevolve appworld setup)
  $PY -m pip install -q -e plugins/coevolve-appworld
fi
# coevolve-vllm is installed without vllm itself (CUDA-only, pins its own torch): the adapter's
# CPU tests need only its own code.
if [ -f plugins/coevolve-vllm/pyproject.toml ]; then
  $PY -m pip install -q --no-deps -e plugins/coevolve-vllm
fi
# bfcl-eval (without its dependencies, above) and coevolve-vllm (without vllm) miss requirements
# on purpose; pip check lists each of them (about 25 lines). Say so in one line and show only
# the other problems, if any.
report=$($PY -m pip check 2>&1) || true
expected=$(printf '%s\n' "$report" | grep -cE '^(bfcl-eval|coevolve-vllm) ' || true)
other=$(printf '%s\n' "$report" | grep -vE '^(bfcl-eval|coevolve-vllm) |^No broken requirements|^$' || true)
if [ "$expected" -gt 0 ]; then
  echo "pip check: $expected unmet requirements of bfcl-eval and coevolve-vllm, expected (installed without their dependencies on purpose)"
fi
if [ -n "$other" ]; then
  printf '%s\n' "$other"
fi
