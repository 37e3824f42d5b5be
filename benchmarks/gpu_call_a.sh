#!/usr/bin/env bash
# Device call A (2026-11-29): issue 2 evaluations, GPU tests, profile (issue 5) and bench (issue 4) acceptance.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target "$PWD/.site" .whl/*.whl >/dev/null 2>&1
export PYTHONPATH="$PWD/src:$PWD/.site" PYTHONUNBUFFERED=1
mkdir -p /tmp/bw && dpkg -x .carry/bubblewrap_*.deb /tmp/bw && export KERNELLOOP_BWRAP=/tmp/bw/usr/bin/bwrap
KL="python3 -m kernelloop.cli"; T=examples/ln_softmax_dropout; S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >> $S
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" >> $S
for n in baseline fused; do
  f=$T/baseline.py; [ $n = fused ] && f=$T/candidates/fused_naive.py
  s=$(date +%s.%N)
  timeout 150 $KL evaluate $T $f --json > $OUT/eval_$n.json 2>/tmp/err_$n; rc=$?
  echo "evaluate $n rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$s,1))")s $(python3 -c "import json; r=json.load(open('$OUT/eval_$n.json')); print(r['verdict']['category'], len(r['checks']), 'checks', r['verdict']['reasons'][:2])" 2>&1)" | tee -a $S
  tail -2 /tmp/err_$n >> $S
done
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/evaluate tests/bench tests/profile 2>&1 | tail -6 | tee -a $S
timeout 200 bash benchmarks/gpu_profile.sh 2>&1 | tail -12 | tee -a $S
timeout 250 bash benchmarks/gpu_bench.sh 2>&1 | tail -15 | tee -a $S
cd $OUT && tar czf extra.tgz $(ls | grep -vE '^(summary.txt|eval_baseline.json|eval_fused.json|extra.tgz)$') 2>/dev/null && ls | grep -vE '^(summary.txt|eval_baseline.json|eval_fused.json|extra.tgz)$' | xargs rm -f
ls $OUT
