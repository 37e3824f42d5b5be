#!/usr/bin/env bash
# H200 acceptance for issue 5 (profile): `kernelloop profile` under Nsight Compute, in the sandbox.
#   1. the flagship's fused candidate alone, timed (acceptance: <= 60 s);
#   2. the same with --parent baseline.py (deltas vs the three-kernel baseline);
#   3. the GPU tests of tests/profile.
# Writes $OUT/profile_fused.json, $OUT/profile_vs_parent.json, $OUT/profile_summary.txt and
# prints a short table last. Expects PYTHONPATH (src + carried wheels) and KERNELLOOP_BWRAP
# exported as for the other gpu_*.sh scripts; about 2-3 minutes.
set -u
[ -n "${KERNELLOOP_BWRAP:-}" ] || source benchmarks/device_env.sh
export PYTHONUNBUFFERED=1
T=examples/ln_softmax_dropout
F=$T/candidates/fused_naive.py
ARGS="--shape 16384x8192 --dtype bfloat16 --json"
KL="python3 -m kernelloop.cli profile"
S=$OUT/profile_summary.txt
: > "$S"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2" 2>/dev/null || echo "?"; }

echo "== ncu: $(/usr/local/cuda/bin/ncu --version 2>&1 | tail -1)" >> "$S"

s=$(now); timeout 200 $KL $T $F $ARGS > "$OUT/profile_fused.json" 2>> "$S"; rc1=$?; e=$(now)
w1=$(secs "$s" "$e")
s=$(now); timeout 200 $KL $T $F --parent $T/baseline.py $ARGS > "$OUT/profile_vs_parent.json" 2>> "$S"; rc2=$?; e=$(now)
w2=$(secs "$s" "$e")

for j in profile_fused profile_vs_parent; do
  echo "== $j summary" >> "$S"
  field "$OUT/$j.json" "d['summary']" >> "$S"
done

src1=$(field "$OUT/profile_fused.json" "d['profile']['source']")
if [ "$src1" != "ncu" ]; then
  # Tell a sandbox problem from an ncu problem: the same profile without isolation.
  echo "== fused without the sandbox (diagnosis: the sandboxed run fell back)" >> "$S"
  timeout 120 $KL $T $F $ARGS --sandbox none 2>> "$S" \
    | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['profile']['source'], d['profile']['missing'])" >> "$S" 2>&1
fi

echo "== pytest -m gpu tests/profile" >> "$S"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/profile 2>&1 | tail -8 >> "$S"
pt=$(tail -1 "$S")

bound=$(field "$OUT/profile_fused.json" "d['profile']['classifications'][0]['bound']")
dram=$(field "$OUT/profile_fused.json" "round(d['profile']['kernels'][0]['dram_throughput_pct'], 1)")
busy=$(field "$OUT/profile_fused.json" "d['profile']['classifications'][0]['busiest_pipe']")
pct=$(field "$OUT/profile_fused.json" "round(d['profile']['roofline']['pct_of_floor'], 1)")
tok=$(field "$OUT/profile_fused.json" "(len(d['summary']) + 3) // 4")
nk=$(field "$OUT/profile_vs_parent.json" "len(d['parent_profile']['kernels'])")
regr=$(field "$OUT/profile_vs_parent.json" "[x['metric'] for x in d['profile']['deltas'] if x['regression'] and x['metric'] != 'duration_us']")
{
  echo
  echo "what                         | result"
  echo "-----------------------------|-------------------------------------------"
  echo "fused alone: rc, wall        | rc=$rc1 ${w1}s (acceptance <= 60 s)"
  echo "fused source / bound         | $src1 / $bound (must not be memory-bound)"
  echo "fused DRAM % / busiest pipe  | $dram% / $busy; $pct% of floor; ~$tok tokens"
  echo "with --parent: rc, wall      | rc=$rc2 ${w2}s; parent kernels=$nk"
  echo "regressions flagged          | $regr"
  echo "pytest -m gpu tests/profile  | $pt"
} | tee -a "$S"
