#!/usr/bin/env bash
# Install the core with its extras and every plugin of this repository into the given Python's
# environment, editable. torch must already be installed (pinned) by the caller.
set -euo pipefail
PY=${1:-python}
cd "$(dirname "$0")/.."
$PY -m pip install -q -e ".[report,docs,dev]"
$PY -m pip install -q -e examples/plugins/coevolve-kvstore
for p in plugins/coevolve-signals plugins/coevolve-grpo plugins/coevolve-litellm plugins/coevolve-warehouse; do
  [ -f "$p/pyproject.toml" ] && $PY -m pip install -q -e "$p"
done
if [ -f plugins/coevolve-bfcl/pyproject.toml ]; then
  $PY -m pip install -q -e plugins/coevolve-bfcl
  # bfcl-eval's declared dependencies include torch, provider SDKs and sentence-transformers,
  # none of which the multi-turn backends and checker use: install it without them.
  $PY -m coevolve_bfcl.install
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
$PY -m pip check || true
