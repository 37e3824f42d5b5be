#!/usr/bin/env bash
# Issue 12 on the H200: timing out of the candidate's reach. Two parts (each < 10 min):
#   bash benchmarks/gpu_timing_layout.sh layout   # timing_layout.json: new layout vs the old in-process timer
#   bash benchmarks/gpu_timing_layout.sh tests    # gpu_timing_tests.log: every gpu test the change touches
# Expects what benchmarks/device_env.sh sets up (it is sourced when KERNELLOOP_BWRAP is unset).
set -u
[ -n "${KERNELLOOP_BWRAP:-}" ] || source benchmarks/device_env.sh
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to a results folder}"
case "${1:-layout}" in
  layout)
    timeout 560 python3 benchmarks/timing_layout.py --runs 3 --out "$OUT/timing_layout.json" 2>&1 | tee "$OUT/timing_layout.log" | tail -30
    ;;
  tests)
    timeout 570 python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=20 \
      tests/redteam/test_timing_gpu.py tests/bench/test_bench_gpu.py tests/cheats/test_gpu_cheats.py \
      tests/evaluate/test_evaluate.py 2>&1 | tee "$OUT/gpu_timing_tests.log" | tail -40
    ;;
esac
