#!/usr/bin/env bash
# Issue 33/34 on the device in one call: eval speed with the new calls (honest <= 20 s,
# wrong <= 8 s), the gpu tests of the verdict work (GPU_TESTS), the flagship's [e2e] error
# over seeds at its GPU shapes (e2e_errors.py), and one flagship bench whose per-shape
# noise shows whether the first shape still carries the clock ramp.
# $OUT: env.txt, summary.txt, verdicts.tgz (every log and record).
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
T=$(mktemp -d); L=$T/verdicts; mkdir -p "$L"
s=$(date +%s)
timeout "${SPEED_LIMIT:-200}" python3 benchmarks/eval_speed.py "$L" --device cuda \
  --only fused,wrong ${SPEED_ARGS:---repeats 3 --prestart 8} > "$L/eval_speed.txt" 2>&1
echo "== speed rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "^\| " "$L"/eval-speed-*.md 2>/dev/null | cut -c1-400 | head -12 >> "$S"
tail -3 "$L/eval_speed.txt" >> "$S"
s=$(date +%s)
timeout "${TESTS_LIMIT:-220}" python3 -m pytest -m gpu -v -p no:cacheprovider -rA --durations=0 \
  ${GPU_TESTS:?name the test files} > "$L/pytest.txt" 2>&1
echo "== gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "PASSED|FAILED|ERROR|passed|failed|^E " "$L/pytest.txt" | cut -c1-300 | tail -30 >> "$S"
s=$(date +%s)
timeout "${E2E_LIMIT:-70}" python3 benchmarks/e2e_errors.py "$L/e2e-h200" --device cuda --shapes gpu \
  --seeds "${E2E_SEEDS:-20}" > "$L/e2e.txt" 2>&1
echo "== e2e_errors rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "^\| " "$L/e2e-h200.md" 2>/dev/null | head -14 >> "$S"; tail -3 "$L/e2e.txt" >> "$S"
s=$(date +%s)
COLUMNS=160 timeout "${BENCH_LIMIT:-100}" python3 -m kernelloop.cli bench examples/ln_softmax_dropout \
  examples/ln_softmax_dropout/candidates/fused_naive.py --device cuda --no-aa \
  --record "$L/flagship.json" > "$L/flagship.txt" 2>&1
echo "== flagship bench rc=$? $(( $(date +%s) - s ))s" >> "$S"
python3 - "$L/flagship.json" >> "$S" 2>&1 <<'PY' || tail -8 "$L/flagship.txt" >> "$S"
import json, sys
rec = json.load(open(sys.argv[1]))
for sh in rec["shapes"]:
    c = sh["impls"]["candidate"]
    print(f"  {sh['shape']}: noise {sh.get('noise_rel', 0) * 100:.2f}% candidate "
          f"{c['median_ms']:.4f} ms, {c.get('pct_of_floor')} % of floor")
print(f"  problems {rec['problems']} warnings {rec['warnings'][:3]} "
      f"speedup {rec.get('speedup_vs_baseline')}")
PY
tar czf "$OUT/verdicts.tgz" -C "$T" verdicts
cat "$S"
