#!/usr/bin/env bash
# Session 14, second call (issue 13): the second timer through torch.autograd.profiler and
# CUPTI started while the workers import (no torch._dynamo import in a profiled worker's
# first `profile` turn). worker_profile.py again (compare with call 1), eval_speed (median
# of 3, fused and wrong), then the GPU bench tests (both timers), the GPU cheats and the
# staging test. $OUT: env.txt, summary.txt, logs.tgz.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
T=$(mktemp -d); L=$T/logs; mkdir -p "$L"
s=$(date +%s)
timeout 120 python3 benchmarks/worker_profile.py "$L/worker_profile.txt" --device cuda > "$L/wp.out" 2>&1
echo "== worker_profile rc=$? $(( $(date +%s) - s ))s" >> "$S"
head -40 "$L/worker_profile.txt" >> "$S"
s=$(date +%s)
timeout 280 python3 benchmarks/eval_speed.py "$L" --device cuda --repeats 3 --only fused,wrong \
  > "$L/eval_speed.txt" 2>&1
echo "== eval_speed rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "accepted in|wrong in|rejected in|UNEXPECTED" "$L/eval_speed.txt" >> "$S"
grep -E "^\| |trusted side" "$L"/eval-speed-*.md 2>/dev/null | cut -c1-400 >> "$S"
s=$(date +%s)
timeout 170 python3 -m pytest -m gpu -v -p no:cacheprovider -rA --tb=short --timeout 120 \
  tests/bench/test_bench_gpu.py::test_fused_beats_baseline_with_both_timers \
  tests/cheats/test_gpu_cheats.py tests/evaluate/test_staging.py > "$L/pytest.txt" 2>&1
echo "== gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|^E " "$L/pytest.txt" | cut -c1-400 | tail -30 >> "$S"
tar czf "$OUT/logs.tgz" -C "$T" logs
cat "$S"
