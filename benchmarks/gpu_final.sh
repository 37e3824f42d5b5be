#!/usr/bin/env bash
# Device call A: issue 2 evaluations, GPU tests of evaluate/loop, scripted + tuner runs.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target "$PWD/.site" .whl/*.whl >/dev/null 2>&1
export PYTHONPATH="$PWD/src:$PWD/.site" PYTHONUNBUFFERED=1
mkdir -p /tmp/bw && dpkg -x .carry/bubblewrap_*.deb /tmp/bw && export KERNELLOOP_BWRAP=/tmp/bw/usr/bin/bwrap
KL="python3 -m kernelloop.cli"
T=examples/ln_softmax_dropout
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >> $S
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" >> $S
for n in baseline fused; do
  f=$T/baseline.py; [ $n = fused ] && f=$T/candidates/fused_naive.py
  s=$(date +%s.%N)
  timeout 200 $KL evaluate $T $f --json > $OUT/eval_$n.json 2>/tmp/err_$n; rc=$?
  echo "evaluate $n rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$s,1))")s $(python3 -c "import json; r=json.load(open('$OUT/eval_$n.json')); print(r['verdict']['category'], len(r['checks']), 'checks', r['verdict']['reasons'][:2])" 2>&1)" | tee -a $S
done
timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/evaluate 2>&1 | tail -4 | tee -a $S
rm -rf /tmp/t1 /tmp/t2 && cp -r $T /tmp/t1 && cp -r $T /tmp/t2 && rm -rf /tmp/t1/.kernelloop /tmp/t2/.kernelloop
s=$(date +%s)
timeout 240 $KL run /tmp/t1 --agent scripted:/tmp/t1/scripted --dtypes bfloat16 --summary-json $OUT/run_scripted.json > /tmp/run1.log 2>&1
echo "run scripted rc=$? wall=$(( $(date +%s)-s ))s" | tee -a $S; tail -4 /tmp/run1.log | tee -a $S
s=$(date +%s)
timeout 200 $KL run /tmp/t2 --agent tuner --rounds 4 --dtypes bfloat16 --summary-json $OUT/run_tuner.json > /tmp/run2.log 2>&1
echo "run tuner rc=$? wall=$(( $(date +%s)-s ))s" | tee -a $S; tail -4 /tmp/run2.log | tee -a $S
cat $S
