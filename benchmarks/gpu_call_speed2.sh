#!/usr/bin/env bash
# Issue 13, session 13: after the judge's output path went through page-locked 64 MB
# staging chunks (trusted/staging.py), the worker's writes too (worker/calls.write_raw),
# output descriptors closed off the judge's thread, trivial outputs made only when looked
# at, and the audit's read without a join and a copy:
# 1. eval_speed, median of 3 (fused, wrong), one round per repeat;
# 0. the staging GPU test first (stop if it fails); 2. the GPU cheats (verdicts must be unchanged).
# $OUT: env.txt, summary.txt, speed.tgz (eval-speed json/md + logs).
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
T=$(mktemp -d); L=$T/speed; mkdir -p "$L"
timeout 90 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/evaluate/test_staging.py \
  > "$L/staging.txt" 2>&1 || { echo "== staging test failed" >> "$S"; tail -30 "$L/staging.txt" >> "$S";
  tar czf "$OUT/speed.tgz" -C "$T" speed; cat "$S"; exit 1; }
echo "== staging GPU test passed" >> "$S"
s=$(date +%s)
timeout "${SPEED_LIMIT:-300}" python3 benchmarks/eval_speed.py "$L" --device cuda --repeats 3 \
  --only fused,wrong > "$L/eval_speed.txt" 2>&1
echo "== eval_speed rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "accepted in|wrong in|rejected in|UNEXPECTED" "$L/eval_speed.txt" | head -10 >> "$S"
grep -E "^\| |trusted side" "$L"/eval-speed-*.md 2>/dev/null | cut -c1-400 >> "$S"
s=$(date +%s)
timeout "${TEST_LIMIT:-200}" python3 -m pytest -m gpu -v -p no:cacheprovider -rA --durations=0 \
  tests/cheats/test_gpu_cheats.py > "$L/pytest.txt" 2>&1
echo "== gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "PASSED|FAILED|ERROR|passed|failed|^E " "$L/pytest.txt" | cut -c1-300 | tail -20 >> "$S"
tar czf "$OUT/speed.tgz" -C "$T" speed
cat "$S"
