#!/usr/bin/env bash
# Issue 7 on the H200: one `kernelloop run` of the flagship (bf16 shapes; the other dtypes'
# extreme cases still run on the smallest shape), then approve + export of its best, so
# the exported BENCHMARK.md shows the stored benchmark record.
#   [START=FILE] [RUNS=N] bash benchmarks/gpu_loop.sh AGENT [ROUNDS] [LIMIT_S]    e.g. scripted  |  tuner 3 500
# Writes under $OUT: run.log, run_summary.json, history.txt, BENCHMARK.md, report/ (the
# reviewer's report of the run: report.md, report.html, charts), summary.txt.
set -u
source benchmarks/device_env.sh
AGENT=$1; ROUNDS=${2:-}; LIMIT=${3:-520}
T=examples/ln_softmax_dropout; W=/tmp/kl_run_task
rm -rf $W && cp -r $T $W && rm -rf $W/.kernelloop
# START=FILE: begin from another kernel as the baseline (and so the first best), e.g. the
# fused candidate for issue 16's acceptance: the tuner must improve on a good kernel.
[ -n "${START:-}" ] && cp "$START" $W/baseline.py
[ "$AGENT" = scripted ] && AGENT="scripted:$W/scripted"
KL="python3 -m kernelloop.cli"; S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
# RUNS=N: the same run N times in a row on the same task folder (issue 47: a second run of
# the main job spends no round on an idea the first one judged); run K's log is run.log.K.
for k in $(seq 1 "${RUNS:-1}"); do
  s=$(date +%s)
  COLUMNS=150 timeout "$LIMIT" $KL run $W --agent "$AGENT" ${ROUNDS:+--rounds $ROUNDS} --dtypes bfloat16 \
    --summary-json "$OUT/run_summary.json" > "$OUT/run.log" 2>&1
  echo "== kernelloop run $k --agent $AGENT ${ROUNDS:+--rounds $ROUNDS}: rc=$? wall=$(( $(date +%s) - s ))s" >> "$S"
  [ "${RUNS:-1}" -gt 1 ] && cp "$OUT/run.log" "$OUT/run.log.$k" && cp "$OUT/run_summary.json" "$OUT/run_summary.json.$k"
  grep -E "refused|duplicate|promoted|best" "$OUT/run.log" | tail -8 >> "$S"
done
COLUMNS=150 $KL history $W > "$OUT/history.txt" 2>&1
$KL approve $W --by device-script --note "H200 acceptance run" >> "$S" 2>&1
$KL export $W > /tmp/export.txt 2>&1; cat /tmp/export.txt >> "$S"
python3 - > "$OUT/BENCHMARK.md" 2>> "$S" <<'PY'
import re, subprocess
m = re.search(r"commit (\w+)\) in (\S+)", open("/tmp/export.txt").read())
commit, repo = m.groups()
files = subprocess.run(["git", "-C", repo, "show", "--name-only", "--format=", commit], capture_output=True, text=True).stdout.split()
f = next(x for x in files if x.endswith("BENCHMARK.md"))
print(subprocess.run(["git", "-C", repo, "show", f"{commit}:{f}"], capture_output=True, text=True).stdout)
PY
echo "== kernelloop report" >> "$S"; $KL report $W --out "$OUT/report" >> "$S" 2>&1
tail -45 "$OUT/run.log" >> "$S"
cat "$S"
