#!/usr/bin/env bash
# Device call B (2026-11-29): issue 7 acceptance — a scripted run, then a tuner run, on the H200.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target "$PWD/.site" .whl/*.whl >/dev/null 2>&1
export PYTHONPATH="$PWD/src:$PWD/.site" PYTHONUNBUFFERED=1
mkdir -p /tmp/bw && dpkg -x .carry/bubblewrap_*.deb /tmp/bw && export KERNELLOOP_BWRAP=/tmp/bw/usr/bin/bwrap
KL="python3 -m kernelloop.cli"; T=examples/ln_softmax_dropout; S=$OUT/summary.txt
rm -rf /tmp/t1 /tmp/t2 && cp -r $T /tmp/t1 && cp -r $T /tmp/t2 && rm -rf /tmp/t1/.kernelloop /tmp/t2/.kernelloop
s=$(date +%s)
timeout 250 $KL run /tmp/t1 --agent scripted:/tmp/t1/scripted --dtypes bfloat16 --summary-json $OUT/run_scripted.json > $OUT/run_scripted.log 2>&1
echo "run scripted rc=$? wall=$(( $(date +%s)-s ))s" | tee -a $S
s=$(date +%s)
timeout 100 $KL run /tmp/t2 --agent tuner --rounds 1 --dtypes bfloat16 --summary-json $OUT/run_tuner.json > $OUT/run_tuner.log 2>&1
echo "run tuner rc=$? wall=$(( $(date +%s)-s ))s" | tee -a $S
tail -25 $OUT/run_scripted.log; tail -8 $OUT/run_tuner.log
