#!/usr/bin/env bash
# GPU calls by part (sessions 19-20, issues 13, 14). PARTS (space-separated, default "speed task"):
#   speed  eval_speed.py, fused + wrong (SPEED_ARGS, default "--repeats 3 --workers 2
#          --prestart 8": session 19's calls; "--repeats 5 --prestart 8" takes evaluate's own
#          worker rule), with the benchmark's wall time by part (phases_s);
#   task   the tests of imported KernelBench problems' solutions (their GPU tests at the
#          problems' sizes) and of problems whose model draws (TASK_TESTS: other files);
#   rt     the GPU red-team timing tests and the benchmark's GPU tests (audits, clocks);
#   tests  the gpu-marked tests of GPU_TESTS (files or node ids, space-separated);
#   gpu    every gpu-marked test (more than one call's 10 minutes now: split it with `tests`);
#   loop   benchmarks/gpu_loop.sh (LOOP_ARGS, default "tuner 3 300"; START=FILE begins from
#          another kernel), its files under parts/loop;
#   gatecheck  benchmarks/gate_check.sh (its ONLY, GC_* variables), files under parts/gatecheck.
# $OUT: env.txt, summary.txt, parts.tgz (eval-speed json/md, pytest logs).
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
T=$(mktemp -d); L=$T/parts; mkdir -p "$L"
python3 -c "import mcp" 2>/dev/null || IGNORE=--ignore=tests/mcp
for part in ${PARTS:-speed task}; do
  s=$(date +%s)
  case $part in
    speed)
      timeout "${SPEED_LIMIT:-300}" python3 benchmarks/eval_speed.py "$L" --device cuda \
        --only fused,wrong ${SPEED_ARGS:---repeats 3 --workers 2 --prestart 8} > "$L/eval_speed.txt" 2>&1
      echo "== speed rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "^\| |trusted side|by part" "$L"/eval-speed-*.md 2>/dev/null | cut -c1-900 >> "$S"
      tail -3 "$L/eval_speed.txt" >> "$S" ;;
    task)
      timeout "${TASK_LIMIT:-300}" python3 -m pytest -v -p no:cacheprovider -rA --durations=0 \
        -k "${TASK_K:-gpu or dropout}" \
        ${TASK_TESTS:-tests/task/test_draws.py tests/task/test_kernelbench_solutions.py} \
        > "$L/pytest_task.txt" 2>&1
      echo "== task gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|passed|failed|^E " "$L/pytest_task.txt" | cut -c1-300 | tail -25 >> "$S" ;;
    rt)
      timeout "${RT_LIMIT:-300}" python3 -m pytest -m gpu -v -p no:cacheprovider -rA --durations=0 \
        tests/redteam/test_timing_gpu.py tests/bench/test_bench_gpu.py > "$L/pytest_rt.txt" 2>&1
      echo "== red-team timing + bench gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|passed|failed|^E " "$L/pytest_rt.txt" | cut -c1-300 | tail -25 >> "$S" ;;
    tests)
      timeout "${TESTS_LIMIT:-500}" python3 -m pytest -m gpu -v -p no:cacheprovider -rA --durations=0 \
        ${GPU_TESTS:?name the test files} > "$L/pytest_tests.txt" 2>&1
      echo "== gpu tests of $GPU_TESTS rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|^E " "$L/pytest_tests.txt" | grep -v "^PASSED\|^SKIPPED" | cut -c1-300 | tail -40 >> "$S" ;;
    gpu)
      timeout "${GPU_LIMIT:-560}" python3 -m pytest -m gpu -v -p no:cacheprovider --durations=0 \
        ${IGNORE:-} tests > "$L/pytest_gpu.txt" 2>&1
      echo "== all gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|^E " "$L/pytest_gpu.txt" | cut -c1-300 | tail -70 >> "$S" ;;
    loop)
      OUT=$L/loop bash benchmarks/gpu_loop.sh ${LOOP_ARGS:-tuner 3 300} > "$L/loop.txt" 2>&1
      echo "== loop ${START:+from $START }rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -E "^== |best:|finished|over the baseline|% of floor" "$L/loop/summary.txt" | tail -12 >> "$S" ;;
    gatecheck)
      OUT=$L/gatecheck bash benchmarks/gate_check.sh > "$L/gatecheck.txt" 2>&1
      echo "== gatecheck ${ONLY:-all} rc=$? $(( $(date +%s) - s ))s" >> "$S"
      grep -v "^NVIDIA\|^torch" "$L/gatecheck/summary.txt" >> "$S" ;;
  esac
done
tar czf "$OUT/parts.tgz" -C "$T" parts
cat "$S"
