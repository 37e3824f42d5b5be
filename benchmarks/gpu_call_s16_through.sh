#!/usr/bin/env bash
# For session 16 (issue 12's open weakness, docs/security.md "Residual risks"): what the
# run-through check sees of a 20% under-report, shape by shape — benchmarks/through_power.py,
# the lying timer at 0.8 and the honest control at 1.0, twice each (~200 s). Carry .whl and
# .carry. (Not benchmarks/gpu_call_through.sh: that is session 9's saving_probe call.)
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
timeout "${LIMIT:-330}" python3 benchmarks/through_power.py "$OUT/through-power.json" \
  --repeats "${REPEATS:-2}" > "$OUT/through_power.txt" 2>&1
echo "== through_power rc=$?" >> "$S"
cut -c1-1500 "$OUT/through_power.txt" | tail -60 >> "$S"
cat "$S"
