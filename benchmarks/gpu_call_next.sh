#!/usr/bin/env bash
# Device calls for the sessions after 15 (issues 12, 13, 14; carry .whl and .carry):
#   PARTS=tests1  every GPU red-team test but d and the side-stream one, the GPU cheats, the
#                 staging test, the CUDA example (inline and as a .cu file: ~2 builds of
#                 ~55 s) and the both-timers bench test (~290 s on 2026-12-02; f[0.8] is
#                 the open weakness of docs/security.md "Residual risks");
#   PARTS=tests2  red-team d (~290 s by design: its worker is killed at the deadline) and
#                 the side-stream test;
#   PARTS=speed   eval_speed.py, median of 3, fused and wrong, the benchmark's workers
#                 started as smoke passes (~150 s), then stage_write.py (how fast a worker
#                 can write one 512 MiB output to /dev/shm, ~30 s; STAGE_WRITE=0 skips it).
#   PARTS=power   benchmarks/through_power.py (the run-through check's power, REPEATS=3);
#   PARTS=redteam the GPU red-team tests of tests1 alone;
#   PARTS=cuda    the CUDA example's GPU tests and the side-stream red-team test;
#   PARTS=slots   the shared output slots' GPU test (device memory through the sandbox) and
#                 the staging test;
#   PARTS=cprofile benchmarks/correctness_profile.py (both sides of a correctness run);
#   PARTS=verify17 the GPU tests of what session 17 changed (slots, shards, audits, loop);
#   PARTS=workers2 as prestart, with two correctness workers (--workers 2);
#   PARTS=prestart eval_speed.py with each evaluation's correctness workers started 8 s
#                 before it (trusted/prestart.py: the loop's next-evaluation workers).
# Each test runs under pytest-timeout with short tracebacks. Output is written under
# $OUT/l as it goes (a cut call keeps what ran): env.txt, summary.txt, l/*.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
L=$OUT/l; mkdir -p "$L"
PARTS=${PARTS:-tests1}
gpu_tests() {  # name, cap, pytest args...
  local name=$1 cap=$2; shift 2
  local s; s=$(date +%s)
  timeout "$cap" python3 -m pytest -m gpu -v -p no:cacheprovider -rA --tb=short "$@" \
    > "$L/pytest_$name.txt" 2>&1
  echo "== $name rc=$? $(( $(date +%s) - s ))s" >> "$S"
  grep -E "^(PASSED|FAILED|ERROR)|passed|failed|^E " "$L/pytest_$name.txt" | cut -c1-400 | tail -40 >> "$S"
}
if [[ $PARTS == *power* ]]; then  # the run-through check's power (~80 s for 3 repeats)
  timeout 300 python3 benchmarks/through_power.py "$L/through-power.json" \
    --repeats "${REPEATS:-3}" > "$L/through_power.txt" 2>&1
  echo "== through_power rc=$?" >> "$S"; cut -c1-600 "$L/through_power.txt" | tail -40 >> "$S"
fi
if [[ $PARTS == *redteam* ]]; then  # the GPU red team but d and side-stream (~150 s)
  gpu_tests redteam 400 --timeout 200 -k "not gpu_d_ and not side_stream_work_is_counted" \
    tests/redteam/test_timing_gpu.py
fi
if [[ $PARTS == *slots* ]]; then  # shared output slots on the GPU, the staging test (~60 s)
  gpu_tests slots 200 --timeout 120 tests/evaluate/test_inbox.py tests/evaluate/test_staging.py
fi
if [[ $PARTS == *cprofile* ]]; then  # where a correctness evaluation's time goes (~60 s)
  timeout 300 python3 benchmarks/correctness_profile.py "$L/correctness_profile.txt" \
    --device cuda > "$L/correctness_profile_run.txt" 2>&1
  echo "== correctness_profile rc=$?" >> "$S"; cut -c1-300 "$L/correctness_profile_run.txt" | tail -8 >> "$S"
fi
if [[ $PARTS == *verify17* ]]; then  # what session 17 touched, on the GPU (~330 s)
  gpu_tests verify17 540 --timeout 200 -k "not gpu_d_ and not side_stream_work_is_counted" \
    tests/evaluate/test_inbox.py tests/evaluate/test_staging.py tests/evaluate/test_evaluate.py \
    tests/evaluate/test_compile_cache.py tests/cheats/test_gpu_cheats.py \
    tests/redteam/test_timing_gpu.py tests/loop/test_run.py
fi
if [[ $PARTS == *workers2* ]]; then  # eval_speed, warm workers, two correctness workers
  s=$(date +%s)
  timeout 500 python3 benchmarks/eval_speed.py "$L" --device cuda --repeats 3 --only fused,wrong \
    --prestart 8 --workers 2 > "$L/eval_speed_workers2.txt" 2>&1
  echo "== eval_speed --prestart 8 --workers 2 rc=$? $(( $(date +%s) - s ))s" >> "$S"
  grep -E "accepted in|wrong in|rejected in|UNEXPECTED|^\| " "$L/eval_speed_workers2.txt" \
    | cut -c1-400 >> "$S"
fi
if [[ $PARTS == *prestart* ]]; then  # eval_speed with the next evaluation's workers warm
  s=$(date +%s)
  timeout 500 python3 benchmarks/eval_speed.py "$L" --device cuda --repeats 3 --only fused,wrong \
    --prestart 8 > "$L/eval_speed_prestart.txt" 2>&1
  echo "== eval_speed --prestart 8 rc=$? $(( $(date +%s) - s ))s" >> "$S"
  grep -E "accepted in|wrong in|rejected in|UNEXPECTED|^\| " "$L/eval_speed_prestart.txt" \
    | cut -c1-400 >> "$S"
fi
if [[ $PARTS == *cuda* ]]; then  # the CUDA example (2 builds) and the side-stream red team
  gpu_tests cuda 400 --timeout 250 tests/evaluate/test_cuda_example.py \
    tests/redteam/test_timing_gpu.py::test_gpu_side_stream_work_is_counted_and_not_faster
fi
if [[ $PARTS == *tests1* ]]; then
  gpu_tests tests1 540 --timeout 200 -k "not gpu_d_ and not side_stream_work_is_counted" \
    tests/redteam/test_timing_gpu.py tests/cheats/test_gpu_cheats.py \
    tests/evaluate/test_staging.py tests/evaluate/test_cuda_example.py \
    tests/bench/test_bench_gpu.py::test_fused_beats_baseline_with_both_timers
fi
if [[ $PARTS == *tests2* ]]; then
  gpu_tests tests2 420 --timeout 340 -k "gpu_d_ or side_stream_work_is_counted" \
    tests/redteam/test_timing_gpu.py
fi
if [[ $PARTS == *speed* ]]; then
  s=$(date +%s)
  timeout 500 python3 benchmarks/eval_speed.py "$L" --device cuda --repeats 3 --only fused,wrong \
    > "$L/eval_speed.txt" 2>&1
  echo "== eval_speed rc=$? $(( $(date +%s) - s ))s" >> "$S"
  grep -E "accepted in|wrong in|rejected in|UNEXPECTED" "$L/eval_speed.txt" >> "$S"
  grep -E "^\| |trusted side" "$L"/eval-speed-*.md 2>/dev/null | cut -c1-400 >> "$S"
  if [[ ${STAGE_WRITE:-1} == 1 ]]; then
    timeout 90 python3 benchmarks/stage_write.py "$L/stage-write.json" > "$L/stage_write.txt" 2>&1
    echo "== stage_write rc=$?" >> "$S"; cat "$L/stage_write.txt" >> "$S"
  fi
fi
cat "$S"
