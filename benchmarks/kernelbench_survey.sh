#!/usr/bin/env bash
# Issue 46's GPU self-survey: `kernelloop import kernelbench DIR --check --device cuda` over a
# slice of a KernelBench sample (benchmarks/kernelbench_sample.py writes it; carry the folder).
# Args: SAMPLE [FROM [TO]] — the sample folder and the 1-based range of its sorted problem
# files (default all). survey.json is written after every problem, so a call cut by its
# limit keeps the rows it finished. $OUT: survey.json, survey.txt (the command's output).
# Run: SCRIPT="benchmarks/kernelbench_survey.sh .kb 1 20" bash benchmarks/device_run.sh
set -u
SAMPLE=${1:?the sample folder}; FROM=${2:-1}; TO=${3:-100000}
[ -n "${KERNELLOOP_BWRAP:-}" ] || source benchmarks/device_env.sh
OUT=${OUT:-/tmp/kernelbench_survey}; mkdir -p "$OUT"
SLICE=$(mktemp -d)
find "$SAMPLE" -name "*.py" | sort -V | sed -n "${FROM},${TO}p" | while read -r f; do
  mkdir -p "$SLICE/$(basename "$(dirname "$f")")"; cp "$f" "$SLICE/$(basename "$(dirname "$f")")/"
done
echo "problems $FROM-$TO: $(find "$SLICE" -name "*.py" | wc -l)" > "$OUT/survey.txt"
COLUMNS=200 python3 -m kernelloop import kernelbench "$SLICE" --out "$SLICE/tasks" --check \
  --device cuda >> "$OUT/survey.txt" 2>&1
echo "rc=$?" >> "$OUT/survey.txt"
cp "$SLICE/tasks/survey.json" "$OUT/" 2>/dev/null
grep -E "survey|^\[|rc=" "$OUT/survey.txt" | cut -c1-400
