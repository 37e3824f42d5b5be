#!/usr/bin/env bash
# Issue 45's red team on a GPU, once: every wrong kernel of the wave-4 red team (judge tells,
# seeds and randomness, parameter domains, input families, sizes, stage labels) evaluated on
# its task with `kernelloop evaluate --json --no-timing` on the card, beside the honest
# kernels of the same tasks, P at a time (default 3). Correctness only: a wrong kernel must
# be rejected and an honest one judged correct. The flagship and add_rmsnorm run on their
# two smallest GPU shapes (SHAPES_F, SHAPES_R) plus the undeclared shapes every evaluation
# draws; the imported KernelBench LayerNorm (level1/40, the tests' fixture) at its own size.
# $OUT: summary.txt (one row per kernel: name, expected, verdict, category, wall, reason) and
# records.tgz (every --json record).
# Run: SCRIPT="benchmarks/redteam_gpu.sh" bash benchmarks/device_run.sh (PARTS=script)
set -u
[ -n "${KERNELLOOP_BWRAP:-}" ] || source benchmarks/device_env.sh
OUT=${OUT:-/tmp/redteam_gpu}; mkdir -p "$OUT/rec"
S=$OUT/summary.txt; : > "$S"
F=examples/ln_softmax_dropout; R=examples/add_rmsnorm; C=tests/cheats/candidates
KB=$OUT/kb
python3 -m kernelloop import kernelbench tests/task/fixtures/kernelbench/level1/40_LayerNorm.py \
  --out "$KB" --force > "$OUT/import.txt" 2>&1
KBT=$(ls -d "$KB"/*/ | head -1)
J=$OUT/jobs.txt; : > "$J"
add() { echo "$1|$2|$3|$4" >> "$J"; }  # task | candidate | expect | shapes
for c in "$C"/tell_*.py "$C"/rng_*.py "$C"/domain_*.py "$C"/rows_below_128.py \
         "$C"/cols_up_to_16384.py "$C"/int32_offsets.py tests/evaluate/stage_redteam/*.py; do
  [ -f "$c" ] && add "$F" "$c" wrong "${SHAPES_F:-4096x8000,1024x32768}"
done
add "$F" "$F/candidates/fused_naive.py" correct "${SHAPES_F:-4096x8000,1024x32768}"
add "$F" "$F/baseline.py" correct "${SHAPES_F:-4096x8000,1024x32768}"
for c in "$C"/rms_*.py; do add "$R" "$c" wrong "${SHAPES_R:-512x32768,131072x512}"; done
add "$R" "$R/candidates/fused.py" correct "${SHAPES_R:-512x32768,131072x512}"
for c in "$C"/kb_ln_*.py; do add "$KBT" "$c" wrong gpu; done
add "$KBT" benchmarks/kernelbench_solutions/level1_40_LayerNorm/layernorm.py correct gpu
one() {
  IFS='|' read -r task cand expect shapes <<< "$1"
  name=$(basename "$(dirname "$cand")")_$(basename "$cand" .py)
  s=$(date +%s)
  timeout -k 10 "${EACH_LIMIT:-280}" python3 -m kernelloop evaluate "$task" "$cand" --json \
    --no-timing --shapes "$shapes" > "$OUT/rec/$name.json" 2> "$OUT/rec/$name.err"
  rc=$?
  python3 - "$OUT/rec/$name.json" "$name" "$expect" "$rc" "$(( $(date +%s) - s ))" <<'PY'
import json, sys
path, name, expect, rc, wall = sys.argv[1:]
try:
    v = json.loads(open(path).read())["verdict"]
    got = "correct" if v["accepted"] else "wrong"
    why = (v.get("reasons") or [""])[0][:150].replace("|", "/")
    cat = v["category"]
except Exception as e:  # noqa: BLE001
    got, cat, why = "no-record", "-", f"rc {rc}: {e}"[:150]
ok = "OK" if got == expect else "MISS"
print(f"| {ok} | {name} | expect {expect} | {got} | {cat} | {wall}s | {why} |")
PY
}
export -f one; export OUT
head -n "${MAXJOBS:-1000}" "$J" | xargs -d "\n" -P "${P:-3}" -I{} bash -c 'one "$@"' _ {} >> "$S"
echo "kernels: $(wc -l < "$J"); OK: $(grep -c '^| OK' "$S"); MISS: $(grep -c '^| MISS' "$S")" >> "$S"
tar -czf "$OUT/records.tgz" -C "$OUT" rec import.txt jobs.txt 2>/dev/null; rm -rf "$OUT/rec" "$KB"
cat "$S"
