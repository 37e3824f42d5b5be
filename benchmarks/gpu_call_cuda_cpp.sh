#!/usr/bin/env bash
# Issue 14, first run of the CUDA C++ path on a GPU: the flagship's CUDA C++ example baseline
# (examples/ln_softmax_dropout_cuda) and the KernelBench level1/19 ReLU CUDA C++ solution,
# each built by load_inline inside the sandbox and judged (gpu-marked tests), then the
# example's baseline benchmarked (its three kernels' time per shape). Needs nvcc and ninja on
# the device image (printed first). $OUT: env.txt, summary.txt, pytest.txt, bench.txt.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
{ echo "nvcc: $(command -v nvcc || echo none) $(nvcc --version 2>/dev/null | tail -1)";
  echo "ninja: $(command -v ninja || echo none)"; echo "CUDA_HOME=${CUDA_HOME:-unset}"; } >> "$S"
s=$(date +%s)
timeout "${TEST_LIMIT:-360}" python3 -m pytest -m gpu -v -s -p no:cacheprovider --durations=0 \
  tests/evaluate/test_cuda_example.py \
  "tests/task/test_kernelbench_solutions.py::test_gpu_the_cuda_cpp_relu_solution_is_accepted_at_the_problems_size" \
  > "$OUT/pytest.txt" 2>&1
echo "== CUDA C++ gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "PASSED|FAILED|ERROR|passed|failed|^E  |compile [0-9]" "$OUT/pytest.txt" | tail -20 >> "$S"
s=$(date +%s)
COLUMNS=160 timeout "${BENCH_LIMIT:-150}" python3 -m kernelloop.cli bench examples/ln_softmax_dropout_cuda \
  examples/ln_softmax_dropout_cuda/baseline.py --device cuda --no-aa --shapes 4096x8000,16384x8192 \
  > "$OUT/bench.txt" 2>&1
echo "== bench of the CUDA baseline rc=$? $(( $(date +%s) - s ))s" >> "$S"
tail -25 "$OUT/bench.txt" >> "$S"
cat "$S"
