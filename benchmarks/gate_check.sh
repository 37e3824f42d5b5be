#!/usr/bin/env bash
# The gate's strength on the device (issue 33, docs/gate-check.md): `kernelloop gate-check`
# on cuda, every dtype, for the flagship, add_rmsnorm and the three imported KernelBench
# problems (their hand-written Triton solutions mutated), each within ~${GC_LIMIT:-110} s
# (GC_MUTANTS=8 mutants and GC_EQUIVALENTS=2 rewrites each by default, GC_SEED=0 the sample: ~11 evaluations of
# ~10 s; ONLY="ln_softmax_dropout add_rmsnorm" or the KernelBench names picks tasks, to
# split the five over two calls when they run longer).
# Run: bash benchmarks/gate_check.sh (carry .whl and .carry, benchmarks/README.md).
# $OUT gets env.txt, summary.txt (kill rate, false rejections, survivors per task) and one
# JSON record per task (GateCheckReport); commit them under
# benchmarks/results/DATE-h200-gatecheck/.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
T=$(mktemp -d)
KB=tests/task/fixtures/kernelbench
SOL=benchmarks/candidates/kernelbench
CLI="python3 -m kernelloop.cli"
N=${GC_MUTANTS:-8}
run() {  # name task kernel...
  local name=$1; shift
  case " ${ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
  local s; s=$(date +%s)
  timeout "${GC_LIMIT:-110}" $CLI gate-check "$@" --device cuda --max-mutants "$N" \
    --max-equivalents "${GC_EQUIVALENTS:-2}" --seed "${GC_SEED:-0}" --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "==== $name rc=$? $(( $(date +%s) - s ))s" >> "$S"
  python3 - "$OUT/$name.json" >> "$S" 2>&1 <<'PY' || grep -v "checked [0-9]*/" "$OUT/$name.err" | tail -40 | cut -c1-200 >> "$S"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"kill rate {r['kill_rate']} ({r['killed']} killed, {r['survived']} survived, "
      f"{r.get('task_findings', 0)} of them findings about the task) false rejections {r['false_rejections']}"
      f"/{len(r['equivalents'])} stillborn {r.get('stillborn', 0)} not judged "
      f"{r.get('not_judged', 0)} wall {r['wall_s']} s")
for m in r["mutants"]:
    if m["outcome"] != "killed":
        print(" ", m["outcome"], m["operator"], m["line"], m["description"], m["oracle"])
for e in r["equivalents"]:
    if not e["accepted"]:
        print("  FALSE REJECTION", e["description"], e["category"], e["reasons"][:1])
PY
}
run ln_softmax_dropout examples/ln_softmax_dropout
run add_rmsnorm examples/add_rmsnorm
for pair in level1/23_Softmax:level1_23_softmax level1/95_CrossEntropyLoss:level1_95_cross_entropy \
  level2/12_Gemm_Multiply_LeakyReLU:level2_12_gemm_mul_leakyrelu; do
  prob=${pair%%:*}; name=${prob%%/*}_$(basename "$prob")
  tol=""; [ "$prob" = level1/23_Softmax ] && tol="--atol 1e-7"
  case " ${ONLY:-$name} " in *" $name "*) ;; *) continue ;; esac
  $CLI import kernelbench "$KB/$prob.py" --out "$T/tasks" $tol > "$OUT/$name.import.txt" 2>&1
  run "$name" "$T/tasks/$name" "$SOL/${pair##*:}.py"
done
cat "$S"
