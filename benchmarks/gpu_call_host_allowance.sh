#!/usr/bin/env bash
# Session 10 (issues 12, 14): the run-through layout back to its host wait before the units,
# with the host allowance (timing_checks.THROUGH_HOST_MS): the GEMM task's bench test, the
# KernelBench cross-entropy solution's bench (rejected as a liar in the no-wait layout),
# then the honest fused candidate's 5 fresh evaluations (benchmarks/gpu_cheats.sh).
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
s=$(date +%s)
timeout 90 python3 -m pytest -m gpu -v -p no:cacheprovider \
  "tests/evaluate/test_matmul_example.py::test_gpu_fast_candidate_beats_the_baseline_on_every_shape" \
  > "$OUT/pytest.txt" 2>&1
echo "== matmul bench test rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "PASSED|FAILED|^E  " "$OUT/pytest.txt" | head -8 >> "$S"
T=$(mktemp -d); s=$(date +%s)
python3 -m kernelloop.cli import kernelbench tests/task/fixtures/kernelbench/level1/95_CrossEntropyLoss.py --out "$T" > /dev/null 2>&1
COLUMNS=160 timeout 90 python3 -m kernelloop.cli bench "$T/level1_95_CrossEntropyLoss" \
  benchmarks/candidates/kernelbench/level1_95_cross_entropy.py --device cuda --no-aa --compiled \
  --record "$OUT/ce_bench.json" > "$OUT/ce_bench.txt" 2>&1
echo "== cross-entropy bench rc=$? $(( $(date +%s) - s ))s" >> "$S"
python3 - "$OUT/ce_bench.json" >> "$S" 2>&1 <<'PY'
import json, sys
rec = json.load(open(sys.argv[1]))
print(f"  problems: {rec['problems'] or 'none'}; warnings: {rec['warnings']}")
for sh in rec["shapes"]:
    print(f"  {sh['shape']} {sh['dtype']}: " + ", ".join(f"{k} {v['median_ms']:.4f} ms" for k, v in sh["impls"].items()))
print(f"  speedup over eager {rec.get('speedup_vs_baseline')}, over torch.compile {rec.get('speedup_vs_compiled')}")
PY
SKIP_CHEATS=1 bash benchmarks/gpu_cheats.sh > /dev/null 2>&1
cat "$S"
