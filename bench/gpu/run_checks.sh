#!/usr/bin/env bash
# GPU checks of the rollout engines (see bench/gpu/run_checks.py). Installs nothing.
#   bash bench/gpu/run_checks.sh                # size "small" on a GPU machine
#   bash bench/gpu/run_checks.sh --size tiny    # CPU smoke check (vLLM parts skipped)
# Uses $PYTHON if set, else the repo's .venv, else python3. The packages coevolve-sdk,
# coevolve-grpo and coevolve-vllm must be importable: installed, or from this checkout
# (PYTHONPATH below covers a checkout without an install).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="${PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x "$root/.venv/bin/python" ]; then py="$root/.venv/bin/python"; else py="python3"; fi
fi
export PYTHONPATH="$root:$root/plugins/coevolve-grpo:$root/plugins/coevolve-vllm${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
exec "$py" "$here/run_checks.py" "$@"
