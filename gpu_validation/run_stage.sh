#!/usr/bin/env bash
# The whole GPU stage on one device, bounded to 10 minutes (STAGE_BUDGET_S), in three steps:
#   1. kernel   gpu_validation/test_kernel_cuda.py: the kernel interface on CUDA (no weights)
#   2. tiny     gpu_validation/test_qwen_pair.py on the tiny random Qwen2 pair, on CUDA when there
#               is one (SPECVERIFY_STAGE_PAIR=tiny; what CI runs on the CPU); table: tiny_table.json
#   3. real     the same tests on the real Qwen2.5 pair where its weights are present (HF cache,
#               a SPECVERIFY_REAL_DIR GGUF pair, or SPECVERIFY_ALLOW_DOWNLOAD=1), with the
#               predict-vs-measure table as JSON: qwen_table.json; else one skip line
# Without CUDA, step 1 and step 3 skip with one line each (SPECVERIFY_REAL_CPU=1 runs step 3 on the
# CPU) and step 2 runs on the CPU: the summary marks those steps "skipped" and the last line says
# the stage did not run on CUDA. STAGE_REQUIRE_CUDA=1 (for a run on a device machine, where a CPU
# build of torch would otherwise skip the CUDA steps quietly) refuses to start without CUDA, exit 2.
# Each step's output goes to OUT_DIR/<step>.log; a summary ends the run, and the exit status is 1
# when any step failed or ran out of time, else 0.
# Usage: [STAGE_REQUIRE_CUDA=1] [STAGE_BUDGET_S=600] gpu_validation/run_stage.sh [OUT_DIR]
#        (default OUT_DIR: gpu_validation/out)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu_validation/out}
mkdir -p "$out"
python=${PYTHON:-python}
budget=${STAGE_BUDGET_S:-600}
export HYPOTHESIS_PROFILE=ci
GRACE_S=10 # a step past its limit gets SIGTERM, then SIGKILL this much later: kept out of every limit
declare -a summary=()
device=$("$python" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else f'no CUDA device (torch {torch.__version__})')" 2>/dev/null || echo "no CUDA device (torch missing)")
if [[ $device == "no CUDA device"* && ${STAGE_REQUIRE_CUDA:-0} == 1 ]]; then
  echo "GPU stage: refused: STAGE_REQUIRE_CUDA=1 but $device (a CPU build of torch? docs/REAL_MODELS.md, On a GPU, installs the CUDA one)" >&2
  exit 2
fi
failed=0
declare -a skipped_steps=()

# step NAME CAP_S ENV... -- PYTEST_ARGS...: run pytest for at most min(CAP_S, time left) seconds
step() {
  local name=$1 cap=$2
  shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local left=$((budget - SECONDS - GRACE_S)) limit
  limit=$((cap < left ? cap : left))
  if ((limit < 30)); then
    summary+=("$(printf '%-7s FAILED  not run: %d s of the %d s budget left' "$name" $((budget - SECONDS)) "$budget")")
    failed=1
    return
  fi
  local start=$SECONDS rc
  env "${envs[@]}" timeout -k "$GRACE_S" "$limit" "$python" -m pytest -rs -s -p no:cacheprovider "$@" >"$out/$name.log" 2>&1
  rc=$?
  local last header verdict=ok
  last=$(grep -E '^=+ .*(passed|failed|skipped|error|no tests ran).* =+$' "$out/$name.log" | tail -1 | tr -d '=' | xargs)
  [[ $name == kernel ]] || header=$(grep -m1 -o 'pair=[a-z]* device=[a-z0-9:]*' "$out/$name.log")
  if ((rc == 124 || rc == 137)); then
    verdict=FAILED last="timed out after $limit s"
  elif ((rc != 0)); then
    verdict=FAILED
  elif [[ $last == *skipped* && $last != *passed* ]]; then
    verdict=skipped
    skipped_steps+=("$name")
  fi
  ((rc != 0)) && failed=1
  summary+=("$(printf '%-7s %-7s %4d s  %s%s' "$name" "$verdict" $((SECONDS - start)) "${last:-exit $rc}" "${header:+  [$header]}")")
  local skipped
  skipped=$(grep '^SKIPPED' "$out/$name.log" | sed 's/^/          /')
  [[ -n $skipped ]] && summary+=("$skipped")
}

step kernel 180 SPECVERIFY_STAGE_PAIR=real -- gpu_validation/test_kernel_cuda.py
step tiny 150 SPECVERIFY_STAGE_PAIR=tiny SPECVERIFY_GPU_OUT="$out/tiny_table.json" -- gpu_validation/test_qwen_pair.py
step real "$budget" SPECVERIFY_STAGE_PAIR=real SPECVERIFY_GPU_OUT="$out/qwen_table.json" -- gpu_validation/test_qwen_pair.py

echo
echo "GPU stage on $device, $SECONDS s of $budget s (logs and tables in $out/):"
printf '%s\n' "${summary[@]}"
if ((failed)); then
  echo "GPU stage: FAILED"
  exit 1
fi
if ((${#skipped_steps[@]})); then
  echo "GPU stage: ok where it ran; skipped: ${skipped_steps[*]} (the SKIPPED lines say why)"
else
  echo "GPU stage: ok"
fi
