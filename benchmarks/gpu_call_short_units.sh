#!/usr/bin/env bash
# Issue 12, next step after session 10 (benchmarks/results/2026-12-01-h200-session10): why an
# honest short unit (the GEMM task's tiled candidate, kernels of 0.03-0.05 ms) shows up to
# 0.29 ms per unit more on the trusted clock than its events inside the sandboxed timing
# worker, when the same layout outside the sandbox shows 0.07 ms (through_diag.py). Logs
# every run-through check's inputs (per-slot batch walls and unit counts) for 4 honest
# copies against the baseline at three short shapes, then the outside-the-sandbox probe.
# $OUT: env.txt, summary.txt, saving_probe_gemm.json, through_diag.json, probe.log.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
s=$(date +%s)
timeout "${PROBE_LIMIT:-300}" python3 benchmarks/saving_probe.py "$OUT/saving_probe_gemm.json" \
  --task examples/matmul_bias_gelu --honest-file examples/matmul_bias_gelu/candidates/fast.py \
  --no-best --scales "" --honest 4 --shapes 128x4096x4096,16x8192x8192,1000x3000x1000 \
  > "$OUT/probe.log" 2>&1
echo "== GEMM probe rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "^honest" "$OUT/probe.log" | cut -c1-400 >> "$S"
timeout 120 python3 benchmarks/through_diag.py "$OUT/through_diag.json" >> "$S" 2>&1
cat "$S"
