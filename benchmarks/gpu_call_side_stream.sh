#!/usr/bin/env bash
# Session 3, first call: every GPU cheat and bench test, then the side-stream cheat behind
# the static screen evaluated 5 more times (benchmarks/side_stream_check.py), after the
# idle-GPU probe + device-wide timing change of session 2.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
s=$(date +%s)
timeout 300 python3 -m pytest -m gpu -v -p no:cacheprovider tests/cheats tests/bench > "$OUT/pytest.txt" 2>&1
echo "== pytest -m gpu tests/cheats tests/bench rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUT/pytest.txt" | tail -15 >> "$S"
s=$(date +%s)
timeout 200 python3 benchmarks/side_stream_check.py 5 "$OUT/side_stream_check.json" > "$OUT/side_stream.txt" 2>&1
echo "== side_stream_check x5 rc=$? $(( $(date +%s) - s ))s" >> "$S"; tail -8 "$OUT/side_stream.txt" >> "$S"
cat "$S"
