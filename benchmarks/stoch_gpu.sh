#!/usr/bin/env bash
# Issue 45 (randomness tested for independence) on a GPU: the honest kernels (the flagship's
# fused_naive with timing, its baseline and the CUDA C++ example's baseline without) and the
# nine rng_* red-team kernels (tests/cheats/candidates/), each one `kernelloop evaluate` on the
# declared GPU shapes. Writes $OUT/stoch_gpu.txt (one line each: rc, wall, verdict, reason)
# and the JSON records' verdicts. Carry .whl and .carry (benchmarks/README.md).
set -u
source benchmarks/device_env.sh
T=examples/ln_softmax_dropout
C=examples/ln_softmax_dropout_cuda
R="$OUT/stoch_gpu.txt"; : > "$R"
one() {  # label, task, candidate, extra args...
  local label=$1 task=$2 cand=$3; shift 3
  local s e rc
  s=$(date +%s.%N)
  timeout "${EACH_LIMIT:-150}" python3 -m kernelloop.cli evaluate "$task" "$cand" --device cuda --json "$@" \
    > "/tmp/$label.json" 2> "/tmp/$label.err"; rc=$?
  e=$(date +%s.%N)
  python3 - "$label" "$rc" "$s" "$e" "/tmp/$label.json" >> "$R" <<'PY'
import json, sys
label, rc, s, e, path = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
try:
    v = json.load(open(path))["verdict"]
    print(f"{label}: rc={rc} wall={e - s:.1f}s {v['category']} {'; '.join(v['reasons'][:1])[:400]}")
except Exception as exc:  # noqa: BLE001
    print(f"{label}: rc={rc} wall={e - s:.1f}s no record ({exc})")
PY
  [ "$rc" = 0 ] || tail -3 "/tmp/$label.err" | sed "s/^/  $label stderr: /" >> "$R"
}
one honest_fused_naive "$T" "$T/candidates/fused_naive.py"
one honest_baseline "$T" "$T/baseline.py" --no-timing
one honest_cuda_baseline "$C" "$C/baseline.py" --no-timing
for f in tests/cheats/candidates/rng_*.py; do
  one "$(basename "$f" .py)" "$T" "$f" --no-timing --shapes 4096x8000,65536x1024
done
cat "$R"
