#!/usr/bin/env bash
# Issue 3 on the H200: the GPU-only cheats (stale device memory, side stream, patched
# CUDA-event timer, sticky CUDA error) via `pytest -m gpu tests/cheats`, then 5 fresh
# evaluations of the honest fused candidate (each must exit 0). Writes under $OUT:
# cheats_pytest.txt, honest_evals.txt, summary.txt. Budget: ~4 minutes.
# Sources benchmarks/device_env.sh unless KERNELLOOP_BWRAP is already set up.
set -u
[ -n "${KERNELLOOP_BWRAP:-}" ] || source benchmarks/device_env.sh
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu_cheats_out}; mkdir -p "$OUT"
T=examples/ln_softmax_dropout
t0=$(date +%s)

if [ -n "${SKIP_CHEATS:-}" ]; then  # only the 5 honest evaluations
  echo "skipped (SKIP_CHEATS)" > "$OUT/cheats_pytest.txt"; prc=skipped
elif python3 -c "import pytest" 2>/dev/null; then
  timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/cheats > "$OUT/cheats_pytest.txt" 2>&1; prc=$?
else  # no pytest on the box: call the gpu test functions directly
  timeout 150 python3 - > "$OUT/cheats_pytest.txt" 2>&1 <<'PY'; prc=$?
import traceback
from kernelloop.task import load_task
import tests.cheats.test_gpu_cheats as m
task, bad = load_task("examples/ln_softmax_dropout"), 0
for name in [n for n in dir(m) if n.startswith("test_")]:
    try:
        getattr(m, name)(task); print("PASSED", name)
    except Exception:
        bad += 1; print("FAILED", name); traceback.print_exc()
raise SystemExit(1 if bad else 0)
PY
fi
t1=$(date +%s)

: > "$OUT/honest_evals.txt"
ok=0
for i in 1 2 3 4 5; do
  s=$(date +%s.%N)
  timeout 60 python3 -m kernelloop.cli evaluate $T $T/candidates/fused_naive.py --shapes 4096x8000,65536x1024 --json \
    > /tmp/honest_$i.json 2> /tmp/honest_$i.err; rc=$?
  e=$(date +%s.%N)
  line=$(python3 - "$rc" "$s" "$e" /tmp/honest_$i.json <<'PY'
import json, sys
rc, s, e, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
try:
    r = json.load(open(path)); v = r["verdict"]
    unseen = sorted({c["shape"] for c in r["checks"]} - {"4096x8000", "65536x1024", "all"})
    fused = [t for t in r["timings"] if t["impl"] == "candidate" and t["dtype"] == "bfloat16"]
    med = " ".join(f"{t['shape']}={t['median_ms']:.3f}ms" for t in fused)
    print(f"rc={rc} wall={e - s:.1f}s {v['category']} unseen={','.join(unseen)} checks={len(r['checks'])} {med} {'; '.join(v['reasons'][:2])}")
except Exception as exc:  # noqa: BLE001
    print(f"rc={rc} wall={e - s:.1f}s no record ({exc})")
PY
)
  echo "eval $i $line" >> "$OUT/honest_evals.txt"
  [ "$rc" = 0 ] && ok=$((ok + 1))
  tail -2 /tmp/honest_$i.err >> "$OUT/honest_evals.txt"
done
t2=$(date +%s)

{
  echo "== gpu cheats (pytest -m gpu tests/cheats): rc=$prc, $((t1 - t0)) s"
  grep -E "passed|failed|PASSED|FAILED|error" "$OUT/cheats_pytest.txt" | tail -8
  echo "== honest fused, 5 fresh evaluations (4096x8000,65536x1024, all dtypes): $ok/5 exit 0, $((t2 - t1)) s"
  grep "^eval" "$OUT/honest_evals.txt"
} | tee -a "$OUT/summary.txt"
