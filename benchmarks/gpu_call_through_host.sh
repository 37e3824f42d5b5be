#!/usr/bin/env bash
# Session 10 (issues 12 and 14): after the run-through layout lost its host wait between
# the inputs and the units (an honest GEMM at 16x8192x8192 had been called a liar) and
# output files were allowed up to the device's memory (KernelBench's 6.4 GB softmax output
# had hit a fixed 1 GiB RLIMIT_FSIZE): the GEMM task's and the GPU red team's tests, then
# the KernelBench solutions (benchmarks/gpu_call_kernelbench.sh, with the compiled slot).
# $OUT: env.txt, summary.txt (both parts), pytest.txt, logs.tgz.
set -u
source benchmarks/device_env.sh
s=$(date +%s)
timeout "${TEST_LIMIT:-240}" python3 -m pytest -m gpu -v -p no:cacheprovider --durations=0 \
  tests/evaluate/test_matmul_example.py tests/redteam/test_timing_gpu.py \
  --deselect tests/redteam/test_timing_gpu.py::test_gpu_d_work_left_on_the_gpu_for_the_others_turns_is_seen_by_the_idle_probe \
  > "$OUT/pytest.txt" 2>&1
r="== matmul + red team gpu tests rc=$? $(( $(date +%s) - s ))s"
KB_LIMIT=${KB_LIMIT:-300} bash benchmarks/gpu_call_kernelbench.sh > /dev/null 2>&1
{ echo "$r"; grep -E "PASSED|FAILED|ERROR|passed|failed|^E  " "$OUT/pytest.txt" | tail -30; } >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
