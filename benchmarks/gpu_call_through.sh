#!/usr/bin/env bash
# Issue 12, session 9: measure the second run-through layout (inputs first, units queued back
# to back) with honest copies, the tuner's faster Philox candidate and lying workers; then
# the GPU red team with the run-through verdict acting (THROUGH_ACTS flipped in this
# device copy only), to decide whether it may act in the repository.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
s=$(date +%s)
timeout "${PROBE_LIMIT:-290}" python3 benchmarks/saving_probe.py "$OUT/saving_probe.json" \
  --shapes 4096x8000,16384x8192,1024x32768 --scales 1,0.95,0.8,0.5 --repeats 2 --honest 2 \
  --extra benchmarks/candidates/fused_randint4x.py > "$OUT/probe.log" 2>&1
echo "== probe rc=$? $(( $(date +%s) - s ))s" >> "$S"
sed -i 's/^THROUGH_ACTS = False/THROUGH_ACTS = True/' src/kernelloop/evaluate/trusted/timing_checks.py
grep -n "^THROUGH_ACTS" src/kernelloop/evaluate/trusted/timing_checks.py >> "$S"
s=$(date +%s)
timeout "${TEST_LIMIT:-230}" python3 -m pytest -m gpu -v -p no:cacheprovider -rxX \
  tests/redteam/test_timing_gpu.py tests/evaluate/test_evaluate.py > "$OUT/pytest.txt" 2>&1
echo "== redteam gpu (acting) rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "PASSED|FAILED|ERROR|XPASS|XFAIL|passed|failed|^E  " "$OUT/pytest.txt" | tail -40 >> "$S"
cat "$S"
