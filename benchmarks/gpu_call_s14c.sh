#!/usr/bin/env bash
# Session 14, third call (issue 13): the second timer moved after every shape's events
# (call 2 started CUPTI while the workers imported, and the side-stream cheat's escaped
# work went unseen by the idle-GPU probe). The side-stream cheat and the both-timers
# bench test first, then eval_speed (median of 3, fused and wrong).
# $OUT: env.txt, summary.txt, l/ (pytest and eval_speed output, written as they go).
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
L=$OUT/l; mkdir -p "$L"
s=$(date +%s)
timeout 100 python3 -m pytest -m gpu -v -p no:cacheprovider -rA --tb=short --timeout 90 \
  tests/cheats/test_gpu_cheats.py::test_side_stream_refused_and_not_faster_behind_the_screen \
  tests/bench/test_bench_gpu.py::test_fused_beats_baseline_with_both_timers > "$L/pytest.txt" 2>&1
echo "== gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|^E " "$L/pytest.txt" | cut -c1-400 | tail -20 >> "$S"
s=$(date +%s)
timeout 150 python3 benchmarks/eval_speed.py "$L" --device cuda --repeats 3 --only fused,wrong \
  > "$L/eval_speed.txt" 2>&1
echo "== eval_speed rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "accepted in|wrong in|rejected in|UNEXPECTED" "$L/eval_speed.txt" >> "$S"
grep -E "^\| |trusted side" "$L"/eval-speed-*.md 2>/dev/null | cut -c1-400 >> "$S"

cat "$S"
