#!/usr/bin/env bash
# Issue 34's cross-check of the suite's board: one shared KernelBench problem imported and
# benched standalone (`kernelloop bench TASK SOLUTION --device cuda --compiled --record`),
# so its speedups over eager and over torch.compile can be held to the suite's row (5%).
#   bash benchmarks/bench_standalone.sh level2/12_Gemm_Multiply_LeakyReLU.py level2_12_Gemm_Multiply_LeakyReLU/gemm.py
# $1: the problem file under tests/task/fixtures/kernelbench_shared; $2: the solution under
# benchmarks/kernelbench_solutions. $OUT (device_run.sh's script part): bench.txt, bench.json.
set -u
source benchmarks/device_env.sh
T=$(mktemp -d)
python3 -m kernelloop.cli import kernelbench "tests/task/fixtures/kernelbench_shared/$1" --out "$T" > "$OUT/import.txt" 2>&1
task=$(ls -d "$T"/*/ | head -1)
COLUMNS=160 python3 -m kernelloop.cli bench "$task" "benchmarks/kernelbench_solutions/$2" \
  --device cuda --compiled --record "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
echo "bench rc=$?"; tail -25 "$OUT/bench.txt"
