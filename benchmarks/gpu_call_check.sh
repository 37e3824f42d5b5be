#!/usr/bin/env bash
# Short check after a timing change (session 2, last call): the GPU timing tests, the
# side-stream cheat test, and one `kernelloop bench` of fused vs baseline on 5 shapes.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
s=$(date +%s)
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/bench \
  "tests/cheats/test_gpu_cheats.py::test_side_stream_refused_and_not_faster_behind_the_screen" > "$OUT/pytest.txt" 2>&1
echo "== pytest rc=$? $(( $(date +%s) - s ))s" >> "$S"; tail -3 "$OUT/pytest.txt" >> "$S"
s=$(date +%s)
COLUMNS=160 timeout 60 python3 -m kernelloop.cli bench examples/ln_softmax_dropout \
  examples/ln_softmax_dropout/candidates/fused_naive.py --dtype bfloat16 --record "$OUT/bench_record.json" > "$OUT/bench.txt" 2>&1
echo "== kernelloop bench fused_naive rc=$? $(( $(date +%s) - s ))s" >> "$S"; tail -22 "$OUT/bench.txt" >> "$S"
cat "$S"
