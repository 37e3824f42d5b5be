#!/usr/bin/env bash
# The ordered side-stream cheat behind the screen, 5 evaluations, then shared/GPU.md's
# anchors re-measured with the session-2 timer (session 3, call 3).
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
s=$(date +%s)
timeout 200 python3 benchmarks/side_stream_check.py 5 "$OUT/side_stream_check.json" > "$OUT/side_stream.txt" 2>&1
echo "== side_stream_check x5 rc=$? $(( $(date +%s) - s ))s" >> "$S"; tail -6 "$OUT/side_stream.txt" | cut -c1-400 >> "$S"
s=$(date +%s)
timeout 120 python3 benchmarks/anchors.py --out "$OUT/anchors.json" > "$OUT/anchors.txt" 2>&1
echo "== anchors rc=$? $(( $(date +%s) - s ))s" >> "$S"; tail -25 "$OUT/anchors.txt" >> "$S"
cat "$S"
