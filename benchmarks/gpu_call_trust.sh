#!/usr/bin/env bash
# Issue 12 on the H200, call A: the gpu tests the trust-boundary work touches (sandbox,
# per-implementation timing, red-team timing cheats, GPU cheats, evaluate), one log back.
set -u
source benchmarks/device_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target "$PWD/.site" .whl/pyseccomp-*.whl >/dev/null 2>&1
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
s=$(date +%s)
timeout "${LIMIT:-560}" python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=15 \
  ${TESTS:-tests/redteam/test_timing_gpu.py tests/bench/test_bench_gpu.py tests/cheats/test_gpu_cheats.py tests/evaluate/test_evaluate.py} \
  > "$OUT/pytest.txt" 2>&1
echo "== rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "PASSED|FAILED|ERROR|SKIPPED|XFAIL|passed|failed|^[0-9.]+s call" "$OUT/pytest.txt" | tail -40 >> "$S"
cat "$S"
