#!/usr/bin/env bash
# One device call: set up, GPU tests, evaluate baseline + fused on all GPU shapes/dtypes,
# capture Nsight Compute reports. Writes everything under $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target "$PWD/.site" .whl/*.whl >/dev/null 2>&1
export PYTHONPATH="$PWD/src:$PWD/.site" PYTHONUNBUFFERED=1
mkdir -p /tmp/bw && dpkg -x .carry/bubblewrap_*.deb /tmp/bw && export KERNELLOOP_BWRAP=/tmp/bw/usr/bin/bwrap
KL="python3 -m kernelloop.cli"
T=examples/ln_softmax_dropout
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $OUT/env.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" | tee -a $OUT/env.txt
for impl in baseline:$T/baseline.py fused:$T/candidates/fused_naive.py; do
  n=${impl%%:*}; f=${impl#*:}
  s=$(date +%s.%N)
  timeout 280 $KL evaluate $T $f --json > $OUT/eval_$n.json 2> /tmp/eval_$n.err; rc=$?
  e=$(date +%s.%N)
  echo "evaluate $n rc=$rc wall=$(python3 -c "print(round($e-$s,1))")s" | tee -a $OUT/summary.txt
  tail -3 /tmp/eval_$n.err | tee -a $OUT/summary.txt
done
NCU=/usr/local/cuda/bin/ncu
SECS="--section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats"
for impl in baseline:$T/baseline.py fused:$T/candidates/fused_naive.py; do
  n=${impl%%:*}; f=${impl#*:}
  s=$(date +%s)
  CMD=$(python3 -c "import shlex,sys; from kernelloop.profile import ncu_command; print(shlex.join(ncu_command(sys.argv[2:], sys.argv[1])))" $OUT/ncu_$n.csv python3 benchmarks/ncu_capture.py $T $f --shape 16384x8192 --dtype bfloat16)
  eval timeout 120 $CMD > /tmp/ncu_$n.out 2> /tmp/ncu_$n.err; rc=$?
  if [ $rc -ne 0 ] || [ ! -s $OUT/ncu_$n.csv ]; then
    echo "ncu_command failed rc=$rc: $(tail -3 /tmp/ncu_$n.out /tmp/ncu_$n.err)" | tee -a $OUT/summary.txt
    timeout 120 $NCU --clock-control none --nvtx --nvtx-include "kernelloop_profile/" $SECS --csv --page details --print-details all --print-units base \
      python3 benchmarks/ncu_capture.py $T $f --shape 16384x8192 --dtype bfloat16 > $OUT/ncu_$n.csv 2> /tmp/ncu_$n.err; rc=$?
  fi
  echo "ncu $n rc=$rc wall=$(( $(date +%s) - s ))s rows=$(wc -l < $OUT/ncu_$n.csv)" | tee -a $OUT/summary.txt
  tail -2 /tmp/ncu_$n.err
done
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/evaluate 2>&1 | tail -15 | tee $OUT/pytest_gpu.txt
cat $OUT/summary.txt
