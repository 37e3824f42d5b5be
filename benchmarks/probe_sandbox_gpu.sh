#!/usr/bin/env bash
# What the unprivileged sandbox needs on the GPU machine (issue 12): libseccomp present,
# CUDA + Triton under bwrap --unshare-user --cap-drop ALL with only GPU 0's nodes, and
# whether Nsight Compute can read counters there. Changes no GPU setting.
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
{
echo "== id: $(id)"; echo "== libseccomp:"; ldconfig -p | grep -i seccomp
echo "== RmProfilingAdminOnly:"; grep -i profiling /proc/driver/nvidia/params 2>&1
echo "== /dev/nvidia*:"; ls -l /dev/nvidia* 2>&1
echo "== python prefix: $(python3 -c 'import sys;print(sys.prefix, sys.base_prefix)')"; echo "== pwd $PWD"
} >> "$S" 2>&1
mkdir -p /tmp/probe && cat > /tmp/probe/k.py <<'PY'
import torch, triton, triton.language as tl
@triton.jit
def add(x, y, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B); m = i < n
    tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
x = torch.randn(1 << 20, device="cuda"); y = torch.randn_like(x); o = torch.empty_like(x)
add[(triton.cdiv(x.numel(), 1024),)](x, y, o, x.numel(), B=1024); torch.cuda.synchronize()
import os
print("ok", torch.cuda.device_count(), torch.cuda.get_device_name(0), bool(torch.equal(o, x + y)), "uid", os.getuid())
PY
BW=$KERNELLOOP_BWRAP
NODES=""; for n in /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools; do [ -e $n ] && NODES="$NODES --dev-bind $n $n"; done
BASE="--unshare-all --unshare-user --uid 65534 --gid 65534 --cap-drop ALL --disable-userns --die-with-parent --new-session --ro-bind / / --proc /proc --dev /dev $NODES --tmpfs /tmp --bind /tmp/probe /tmp/probe --setenv TRITON_CACHE_DIR /tmp/probe/tc --setenv HOME /tmp/probe"
echo "== bwrap unprivileged, GPU0 nodes only, triton add:" >> "$S"
timeout 120 $BW $BASE python3 /tmp/probe/k.py >> "$S" 2>&1; echo "rc=$?" >> "$S"
echo "== mount inside (must fail):" >> "$S"
timeout 20 $BW $BASE sh -c 'mount -o remount,rw / 2>&1; umount /tmp 2>&1; echo x > /etc/probe_x 2>&1' >> "$S" 2>&1
NCU=/usr/local/cuda/bin/ncu
echo "== ncu inside unprivileged bwrap:" >> "$S"
timeout 200 $BW $BASE --ro-bind /usr/local/cuda /usr/local/cuda $NCU --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --csv python3 /tmp/probe/k.py > $OUT/ncu_unpriv.txt 2>&1; echo "rc=$?" >> "$S"; tail -8 $OUT/ncu_unpriv.txt >> "$S"
echo "== ncu inside bwrap as root without userns (old mode), for comparison:" >> "$S"
timeout 200 $BW --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev $NODES --tmpfs /tmp --bind /tmp/probe /tmp/probe --setenv TRITON_CACHE_DIR /tmp/probe/tc2 $NCU --clock-control none --metrics gpu__time_duration.sum --csv python3 /tmp/probe/k.py > $OUT/ncu_root.txt 2>&1; echo "rc=$?" >> "$S"; tail -4 $OUT/ncu_root.txt >> "$S"
cat "$S"
