#!/usr/bin/env bash
# Issue 34's numbers on the device: the KernelBench solutions' bench with a compiled slot
# (gpu_call_kernelbench.sh, PAIRS as there), then the flagship's fused_naive benchmarked
# against its baseline twice, printing each shape's noise (the first shape must not carry
# the clock ramp: its noise within 2x the others'). $OUT: env.txt, summary.txt, logs.tgz.
set -u
bash benchmarks/gpu_call_kernelbench.sh > /dev/null 2>&1
source benchmarks/device_env.sh  # the flagship part needs its PYTHONPATH here too
S=$OUT/summary.txt
T=$(mktemp -d)
for i in 1 2; do
  COLUMNS=160 timeout 150 python3 -m kernelloop.cli bench examples/ln_softmax_dropout \
    examples/ln_softmax_dropout/candidates/fused_naive.py --device cuda --no-aa \
    --record "$T/flagship$i.json" > "$T/flagship$i.txt" 2>&1
  echo "== flagship bench $i rc=$?" >> "$S"
  python3 - "$T/flagship$i.json" >> "$S" 2>&1 <<'PY' || tail -8 "$T/flagship$i.txt" >> "$S"
import json, sys
rec = json.load(open(sys.argv[1]))
for sh in rec["shapes"]:
    c = sh["impls"]["candidate"]
    print(f"  {sh['shape']}: noise {sh.get('noise_rel', 0) * 100:.2f}% candidate "
          f"{c['median_ms']:.4f} ms {c.get('pct_of_floor')} % of floor, threshold "
          f"{sh.get('threshold')}")
print(f"  problems {rec['problems']} speedup {rec.get('speedup_vs_baseline')}")
PY
done
tar czf "$OUT/flagship.tgz" -C "$T" .
cat "$S"
