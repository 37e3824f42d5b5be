#!/usr/bin/env bash
# Issue 4 acceptance on the H200 (<= 4 min). Expects PYTHONPATH=$PWD/src:$PWD/.site and
# KERNELLOOP_BWRAP exported (benchmarks/device_env.sh does it). Writes under $OUT:
#   acceptance.json         spread, no-op trials, sandboxed bench wall times and verdicts
#   acceptance.record.json  the full benchmark record of fused_naive vs the baseline
#   anchors.json            shared/GPU.md's anchors re-measured (do_bench + our timer)
set -u
[ -n "${KERNELLOOP_BWRAP:-}" ] || source benchmarks/device_env.sh
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to a results folder}"
LOG=/tmp/gpu_bench.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $LOG
s=$(date +%s)
timeout 140 python3 benchmarks/bench_acceptance.py --out "$OUT/acceptance.json" >> $LOG 2>&1; rc1=$?
echo "acceptance rc=$rc1 $(( $(date +%s) - s ))s" | tee -a $LOG
s=$(date +%s)
timeout 75 python3 benchmarks/anchors.py --out "$OUT/anchors.json" >> $LOG 2>&1; rc2=$?
echo "anchors rc=$rc2 $(( $(date +%s) - s ))s" | tee -a $LOG
timeout 25 python3 -m pytest -m gpu -q -p no:cacheprovider tests/bench 2>&1 | tail -5 | tee -a $LOG
tail -40 $LOG | grep -v "^\s*$" | tail -25
