#!/usr/bin/env bash
# Session 13: (1) red-team test c alone with its traceback (it failed after the
# THROUGH_HOST_MS allowance; the first call of the session timed out before pytest's summary),
# (2) eval_speed one repeat (fused, wrong) for the current per-stage breakdown (issue 13),
# (3) the GPU tests the first call did not reach: d, side stream, the four GPU cheats.
# $OUT: env.txt, summary.txt, logs.tgz, eval-speed-*.json/md.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
T=$(mktemp -d); L=$T/logs; mkdir -p "$L"
s=$(date +%s)
timeout 120 python3 -m pytest -m gpu -x -q -p no:cacheprovider -rA \
  "tests/redteam/test_timing_gpu.py::test_gpu_c_a_worker_lying_about_its_events_is_caught_by_the_trusted_clock" \
  > "$L/test_c.txt" 2>&1
echo "== test c rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "^E |passed|failed|raised|claims" "$L/test_c.txt" | cut -c1-600 | head -20 >> "$S"
s=$(date +%s)
timeout "${SPEED_LIMIT:-200}" python3 benchmarks/eval_speed.py "$OUT" --device cuda --repeats 1 \
  --only fused,wrong > "$L/eval_speed.txt" 2>&1
echo "== eval_speed rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "accepted in|wrong in|rejected in" "$L/eval_speed.txt" | head -10 >> "$S"
s=$(date +%s)
timeout "${TEST_LIMIT:-200}" python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=0 \
  "tests/redteam/test_timing_gpu.py::test_gpu_d_work_left_on_the_gpu_for_the_others_turns_is_seen_by_the_idle_probe" \
  "tests/redteam/test_timing_gpu.py::test_gpu_side_stream_work_is_counted_and_not_faster" \
  tests/cheats/test_gpu_cheats.py > "$L/rest.txt" 2>&1
echo "== rest gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "^PASSED|^FAILED|^ERROR|passed|failed|^E " "$L/rest.txt" | cut -c1-300 | tail -20 >> "$S"
tar czf "$OUT/logs.tgz" -C "$T" logs
cat "$S"
