#!/usr/bin/env bash
# One device call for issues 3 and 4 (~8 min): the benchmark acceptance numbers (spread,
# no-op trials, sandboxed bench wall time), the GPU timing tests, then the GPU cheats and
# 5 honest fused evaluations. Everything lands under $OUT.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
s=$(date +%s)
timeout 170 python3 benchmarks/bench_acceptance.py --out "$OUT/acceptance.json" > "$OUT/acceptance.log" 2>&1
echo "== bench_acceptance rc=$? $(( $(date +%s) - s ))s" >> "$S"; tail -5 "$OUT/acceptance.log" >> "$S"
s=$(date +%s)
timeout 80 python3 -m pytest -m gpu -q -p no:cacheprovider tests/bench > "$OUT/pytest_bench_gpu.txt" 2>&1
echo "== pytest -m gpu tests/bench rc=$? $(( $(date +%s) - s ))s" >> "$S"; tail -3 "$OUT/pytest_bench_gpu.txt" >> "$S"
timeout 330 bash benchmarks/gpu_cheats.sh > "$OUT/cheats.log" 2>&1
cat "$S"
