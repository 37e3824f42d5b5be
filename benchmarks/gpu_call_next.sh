#!/usr/bin/env bash
# For the session after 13 (issues 12, 13): PARTS=tests (default) or PARTS=speed.
# tests: every GPU red-team test, the GPU cheats and the staging test, each under
#   pytest-timeout (so one slow test cannot cut the run before pytest's summary, which
#   lost test c's message in session 13), with short tracebacks;
# speed: eval_speed.py, median of 3, fused and wrong (issue 13), one round per repeat.
# $OUT: env.txt, summary.txt, logs.tgz.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
T=$(mktemp -d); L=$T/logs; mkdir -p "$L"
PARTS=${PARTS:-tests}
if [[ $PARTS == *tests* ]]; then
  s=$(date +%s)
  timeout 540 python3 -m pytest -m gpu -v -p no:cacheprovider -rA --tb=short --timeout 170 \
    tests/redteam/test_timing_gpu.py tests/cheats/test_gpu_cheats.py tests/evaluate/test_staging.py \
    > "$L/pytest.txt" 2>&1
  echo "== gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
  grep -E "^(PASSED|FAILED|ERROR)|passed|failed|^E " "$L/pytest.txt" | cut -c1-400 | tail -40 >> "$S"
fi
if [[ $PARTS == *speed* ]]; then
  s=$(date +%s)
  timeout 500 python3 benchmarks/eval_speed.py "$L" --device cuda --repeats 3 --only fused,wrong \
    > "$L/eval_speed.txt" 2>&1
  echo "== eval_speed rc=$? $(( $(date +%s) - s ))s" >> "$S"
  grep -E "accepted in|wrong in|rejected in|UNEXPECTED" "$L/eval_speed.txt" >> "$S"
  grep -E "^\| |trusted side" "$L"/eval-speed-*.md 2>/dev/null | cut -c1-400 >> "$S"
fi
tar czf "$OUT/logs.tgz" -C "$T" logs
cat "$S"
