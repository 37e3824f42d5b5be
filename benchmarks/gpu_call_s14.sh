#!/usr/bin/env bash
# Session 14, first call: where a GPU timing worker's turn goes (worker_profile.py, issue 13),
# then the two GPU red-team tests session 13's call did not reach (d: ~290 s by design, its
# worker is killed at the deadline; the side-stream test), each under pytest-timeout.
# $OUT: env.txt, summary.txt, logs.tgz.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
T=$(mktemp -d); L=$T/logs; mkdir -p "$L"
if [[ ${PARTS:-prof,tests} == *prof* ]]; then
  s=$(date +%s)
  timeout 200 python3 benchmarks/worker_profile.py "$L/worker_profile.txt" --device cuda > "$L/wp.out" 2>&1
  echo "== worker_profile rc=$? $(( $(date +%s) - s ))s" >> "$S"
  head -40 "$L/worker_profile.txt" >> "$S"
fi
if [[ ${PARTS:-prof,tests} == *tests* ]]; then
  s=$(date +%s)
  timeout 420 python3 -m pytest -m gpu -v -p no:cacheprovider -rA --tb=short --timeout 340 \
    tests/redteam/test_timing_gpu.py -k "gpu_d_ or side_stream" > "$L/pytest.txt" 2>&1
  echo "== gpu tests d, side-stream rc=$? $(( $(date +%s) - s ))s" >> "$S"
  grep -E "^(PASSED|FAILED|ERROR)|passed|failed|^E " "$L/pytest.txt" | cut -c1-400 | tail -30 >> "$S"
fi
tar czf "$OUT/logs.tgz" -C "$T" logs
cat "$S"
