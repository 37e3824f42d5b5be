#!/usr/bin/env bash
# Last device call of session 2: the scripted run again (duplicate refusal now leads),
# then the GPU tests of cheats and loop (side-stream graph fix, one-shape scripted loop).
set -u
source benchmarks/device_env.sh
timeout 300 bash benchmarks/gpu_loop.sh scripted "" 280 > /dev/null 2>&1
mv "$OUT/summary.txt" "$OUT/run_summary.txt"
s=$(date +%s)
timeout 260 python3 -m pytest -m gpu -q -p no:cacheprovider tests/cheats tests/loop tests/bench > "$OUT/pytest_gpu.txt" 2>&1
echo "== pytest -m gpu tests/cheats tests/loop tests/bench rc=$? $(( $(date +%s) - s ))s" >> "$OUT/run_summary.txt"
tail -4 "$OUT/pytest_gpu.txt" >> "$OUT/run_summary.txt"
head -4 "$OUT/run_summary.txt"; grep -E "round [0-9]|^best|^finished|needs review|== pytest|passed|failed" "$OUT/run_summary.txt" | head -20
