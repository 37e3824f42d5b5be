#!/usr/bin/env bash
# Issue 12 on the H200, call B: the honest fused candidate in 5 fresh evaluations (new
# sandbox, per-implementation timing), then the timing layout against the old in-process
# timer on the same kernels (timing_layout.py), then ncu inside the sandbox (profile test).
# PARTS (default "evals layout profile") picks which run, so one call fits in 10 minutes.
set -u
source benchmarks/device_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target "$PWD/.site" .whl/pyseccomp-*.whl >/dev/null 2>&1
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
F=examples/ln_softmax_dropout/candidates/fused_naive.py
PARTS=${PARTS:-evals layout profile}
for i in 1 2 3 4 5; do
  [[ " $PARTS " == *" evals "* ]] || break
  s=$(date +%s)
  timeout 115 python3 -m kernelloop.cli evaluate examples/ln_softmax_dropout $F --device cuda --json > "$OUT/eval_$i.json" 2> "$OUT/eval_err.txt"
  rc=$?
  python3 - "$OUT/eval_$i.json" "$rc" "$(( $(date +%s) - s ))" >> "$S" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1])); v = r["verdict"]
    t = {x["shape"]: round(x["median_ms"], 4) for x in r["timings"] if x["impl"] == "candidate"}
    print(f"eval rc={sys.argv[2]} {sys.argv[3]}s accepted={v['accepted']} cat={v['category']} sandbox={r['environment']['sandbox']} checks={len(r['checks'])} cand_ms={t} reasons={v['reasons'][:2]}")
except Exception as e:
    print(f"eval rc={sys.argv[2]} unreadable: {e}")
PY
done
[ -f "$OUT/eval_err.txt" ] && tail -5 "$OUT/eval_err.txt" >> "$S"
if [[ " $PARTS " == *" layout "* ]]; then
s=$(date +%s)
timeout 230 python3 benchmarks/timing_layout.py --runs 2 --out "$OUT/timing_layout.json" > "$OUT/timing_layout.log" 2>&1
echo "== layout rc=$? $(( $(date +%s) - s ))s" >> "$S"; tail -14 "$OUT/timing_layout.log" >> "$S"
fi
if [[ " $PARTS " == *" profile "* ]]; then
s=$(date +%s)
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/profile/test_profile_cmd.py > "$OUT/profile_test.txt" 2>&1
echo "== profile gpu test rc=$? $(( $(date +%s) - s ))s" >> "$S"; grep -E "PASSED|FAILED|passed|failed|^E " "$OUT/profile_test.txt" | head -8 >> "$S"
fi
cat "$S"
