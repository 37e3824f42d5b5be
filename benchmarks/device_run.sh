#!/usr/bin/env bash
# The one device runner: a call on the lent GPU runs the named PARTS (space-separated, in
# order; default "speed task") and brings back one summary. Carry .whl and .carry (and
# .ray for scaleout): benchmarks/README.md says how to download them.
#
#   speed      eval_speed.py, the flagship's fused and wrong candidates, with the
#              benchmark's wall time by part (SPEED_ARGS, default "--repeats 3 --workers 2
#              --prestart 8"; "--repeats 5 --prestart 8" takes evaluate's own worker rule)
#   task       the GPU tests of imported KernelBench problems' solutions at the problems'
#              sizes and of problems whose model draws (TASK_TESTS, TASK_K)
#   rt         the GPU red-team timing tests and the benchmark's GPU tests (audits, clocks)
#   cheats     gpu_cheats.sh: the GPU-only cheats, then 5 evaluations of the honest kernel
#   cuda       the CUDA C++ path: the CUDA example's and level1/19's CUDA C++ tests, then
#              the example's baseline benchmarked (needs nvcc on the image)
#   tests      the gpu-marked tests of GPU_TESTS (files or node ids, space-separated)
#   gpu        every gpu-marked test (more than one call's 10 minutes: split it with tests)
#   loop       gpu_loop.sh (LOOP_ARGS, default "tuner 3 300"; START=FILE begins from
#              another kernel)
#   gatecheck  gate_check.sh: the gate's kill rate and false rejections (ONLY, GC_MUTANTS,
#              GC_EQUIVALENTS, GC_LIMIT)
#   kbsuite    kernelbench_suite.sh: the shared KernelBench problems through `suite` with
#              our solutions (ONLY, LIMIT, END; merge calls with kernelbench_board_merge.py)
#   aa         aa_kernelbench.sh: A/A of imported baselines at their sizes (PROBS)
#   scaleout   scaleout.py on nvidia-h200-x2 (SCALEOUT_PARTS, SCALEOUT_ARGS; Ray from
#              .ray/raysite.tar.xz when carried), then the 2-GPU tests
#   script     any measurement script: SCRIPT="benchmarks/X.py ARGS" (python3) or
#              SCRIPT="benchmarks/X.sh ARGS" (bash, with OUT set to the part's folder);
#              the word @OUT in ARGS becomes that folder (parts/script); SCRIPT_LIMIT
# Each part has its own time limit (NAME_LIMIT, seconds), and the whole call has one:
# CALL_LIMIT (default 560 s, under the device tool's 600 s per command). No part runs past
# it — a part's limit is cut to what is left, a part with under 30 s left is skipped — so
# the tarball is always written: a call cut by the tool's own timeout brought nothing back
# (session 25).
# $OUT: env.txt, summary.txt (every part's headline lines) and parts.tgz (every log,
# record and file a part wrote). Results go under results/DATE-DEVICE/ with a README row
# naming this script, its PARTS and variables, and the commit.
set -u
DEADLINE=$(( $(date +%s) + ${CALL_LIMIT:-560} - 15 ))  # 15 s kept for the tarball
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
T=$(mktemp -d); L=$T/parts; mkdir -p "$L"
python3 -c "import mcp" 2>/dev/null || IGNORE=--ignore=tests/mcp
lim() {  # $1: a part's own limit; prints it, cut to what is left of the call
  local left=$(( DEADLINE - $(date +%s) ))
  echo $(( $1 < left ? $1 : left ))
}
gpu_pytest() {  # $1 limit, $2 log name, rest: pytest arguments
  local limit=$1 log=$2; shift 2
  timeout -k 10 "$(lim "$limit")" python3 -m pytest -m gpu -v -p no:cacheprovider -rA --durations=0 "$@" \
    > "$L/$log" 2>&1
}
sub_summary() {  # a measurement script's own summary.txt, without the env lines
  [ -f "$1/summary.txt" ] && grep -v "^NVIDIA\|^torch" "$1/summary.txt" | cut -c1-600 >> "$S"
}
for part in ${PARTS:-speed task}; do
  s=$(date +%s)
  if [ "$(lim 30)" -lt 30 ]; then
    echo "== $part skipped: under 30 s left of the call's ${CALL_LIMIT:-560} s (CALL_LIMIT)" >> "$S"
    continue
  fi
  case $part in
    speed)
      timeout -k 10 "$(lim ${SPEED_LIMIT:-300})" python3 benchmarks/eval_speed.py "$L" --device cuda \
        --only fused,wrong ${SPEED_ARGS:---repeats 3 --workers 2 --prestart 8} > "$L/eval_speed.txt" 2>&1
      echo "== speed rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "^\| |trusted side|by part" "$L"/eval-speed-*.md 2>/dev/null | cut -c1-900 >> "$S"
      tail -3 "$L/eval_speed.txt" >> "$S" ;;
    task)
      gpu_pytest "${TASK_LIMIT:-300}" pytest_task.txt -k "${TASK_K:-gpu or dropout}" \
        ${TASK_TESTS:-tests/task/test_draws.py tests/task/test_kernelbench_solutions.py}
      echo "== task gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|passed|failed|^E " "$L/pytest_task.txt" | cut -c1-300 | tail -25 >> "$S" ;;
    rt)
      gpu_pytest "${RT_LIMIT:-300}" pytest_rt.txt tests/redteam/test_timing_gpu.py tests/bench/test_bench_gpu.py
      echo "== red-team timing + bench gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|passed|failed|^E " "$L/pytest_rt.txt" | cut -c1-300 | tail -25 >> "$S" ;;
    cheats)
      OUT=$L/cheats timeout -k 10 "$(lim ${CHEATS_LIMIT:-300})" bash benchmarks/gpu_cheats.sh > "$L/cheats.txt" 2>&1
      echo "== gpu cheats rc=$? $(( $(date +%s) - s ))s" >> "$S"
      sub_summary "$L/cheats" ;;
    cuda)
      { echo "nvcc: $(command -v nvcc || echo none) $(nvcc --version 2>/dev/null | tail -1)";
        echo "ninja: $(command -v ninja || echo none)"; } >> "$S"
      gpu_pytest "${CUDA_LIMIT:-360}" pytest_cuda.txt tests/evaluate/test_cuda_example.py \
        "tests/task/test_kernelbench_solutions.py::test_gpu_the_cuda_cpp_relu_solution_is_accepted_at_the_problems_size"
      echo "== CUDA C++ gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|passed|failed|^E  " "$L/pytest_cuda.txt" | tail -20 >> "$S"
      s=$(date +%s)
      COLUMNS=160 timeout -k 10 "$(lim ${CUDA_BENCH_LIMIT:-150})" python3 -m kernelloop.cli bench \
        examples/ln_softmax_dropout_cuda examples/ln_softmax_dropout_cuda/baseline.py \
        --device cuda --no-aa --shapes 4096x8000,16384x8192 > "$L/cuda_bench.txt" 2>&1
      echo "== bench of the CUDA baseline rc=$? $(( $(date +%s) - s ))s" >> "$S"
      tail -25 "$L/cuda_bench.txt" >> "$S" ;;
    tests)
      gpu_pytest "${TESTS_LIMIT:-500}" pytest_tests.txt ${GPU_TESTS:?name the test files}
      echo "== gpu tests of $GPU_TESTS rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|^E " "$L/pytest_tests.txt" | grep -v "^PASSED\|^SKIPPED" | cut -c1-300 | tail -40 >> "$S" ;;
    gpu)
      gpu_pytest "${GPU_LIMIT:-560}" pytest_gpu.txt ${IGNORE:-} tests
      echo "== all gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|^E " "$L/pytest_gpu.txt" | cut -c1-300 | tail -70 >> "$S" ;;
    loop)
      OUT=$L/loop timeout -k 10 "$(lim 100000)" bash benchmarks/gpu_loop.sh ${LOOP_ARGS:-tuner 3 300} > "$L/loop.txt" 2>&1
      echo "== loop ${START:+from $START }rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "^== |best:|finished|over the baseline|% of floor" "$L/loop/summary.txt" | tail -12 >> "$S" ;;
    gatecheck)
      OUT=$L/gatecheck timeout -k 10 "$(lim 100000)" bash benchmarks/gate_check.sh > "$L/gatecheck.txt" 2>&1
      echo "== gatecheck ${ONLY:-all} rc=$? $(( $(date +%s) - s ))s" >> "$S"
      sub_summary "$L/gatecheck" ;;
    kbsuite)
      OUT=$L/kbsuite timeout -k 10 "$(lim 100000)" bash benchmarks/kernelbench_suite.sh > "$L/kbsuite.txt" 2>&1
      echo "== kernelbench suite ${ONLY:-all} rc=$? $(( $(date +%s) - s ))s" >> "$S"
      sub_summary "$L/kbsuite" ;;
    aa)
      OUT=$L/aa timeout -k 10 "$(lim ${AA_LIMIT:-400})" bash benchmarks/aa_kernelbench.sh > "$L/aa.txt" 2>&1
      echo "== A/A ${PROBS:-default problems} rc=$? $(( $(date +%s) - s ))s" >> "$S"
      sub_summary "$L/aa" ;;
    scaleout)
      if [ -f .ray/raysite.tar.xz ]; then
        mkdir -p /tmp/raysite && tar -xJf .ray/raysite.tar.xz -C /tmp/raysite
        export PYTHONPATH="$PYTHONPATH:/tmp/raysite"
      fi
      { nvidia-smi -L; python3 -c "import ray; print('ray', ray.__version__)" 2>&1; } >> "$S"
      timeout -k 10 "$(lim ${SCALEOUT_LIMIT:-480})" python3 benchmarks/scaleout.py "$L/scaleout" \
        --parts "${SCALEOUT_PARTS:-local,aa,ray}" ${SCALEOUT_ARGS:-} > "$L/scaleout.txt" 2>&1
      echo "== scaleout rc=$? $(( $(date +%s) - s ))s" >> "$S"
      cut -c1-400 "$L/scaleout.txt" | tail -8 >> "$S"
      s=$(date +%s)
      gpu_pytest "${SCALEOUT_TESTS_LIMIT:-200}" pytest_scaleout.txt tests/executor/test_scaleout_gpu.py
      echo "== scale-out gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|passed|failed|^E  " "$L/pytest_scaleout.txt" | tail -20 >> "$S" ;;
    script)
      mkdir -p "$L/script"
      cmd=${SCRIPT:?name the script and its arguments}
      run=python3; [[ "${cmd%% *}" == *.sh ]] && run=bash
      OUT=$L/script timeout -k 10 "$(lim ${SCRIPT_LIMIT:-300})" $run ${cmd//@OUT/$L/script} > "$L/script.txt" 2>&1
      echo "== script $SCRIPT rc=$? $(( $(date +%s) - s ))s" >> "$S"
      cut -c1-400 "$L/script.txt" | tail -15 >> "$S" ;;
    *)
      echo "== unknown part '$part': the parts are speed task rt cheats cuda tests gpu loop gatecheck kbsuite aa scaleout script" >> "$S" ;;
  esac
done
tar czf "$OUT/parts.tgz" -C "$T" parts
cat "$S"
