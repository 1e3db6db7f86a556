#!/usr/bin/env bash
# The GPU stage in one command, bounded to 10 minutes: the tests, then the measure table as JSON.
# Usage: gpu_validation/run_stage.sh [OUT_DIR]   (default: gpu_validation/out)
set -euo pipefail
out=${1:-gpu_validation/out}
mkdir -p "$out"
export HYPOTHESIS_PROFILE=ci SPECVERIFY_GPU_OUT="$out/qwen_table.json"
timeout 600 python -m pytest gpu_validation -rs -s -q 2>&1 | tee "$out/pytest.log"
