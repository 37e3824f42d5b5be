#!/usr/bin/env bash
# Judging speed, before and after a change, side by side in one call (issue 37's "eval
# speed unchanged within noise"): benchmarks/eval_speed.py of an older tree (what it reads:
# `git archive COMMIT src examples tests/cheats/candidates benchmarks/eval_speed.py |
# tar -x -C .old`, git-ignored through .git/info/exclude and carried) and of this one,
# alternately
# (TURNS, default "old new old new": a drift of the card or the machine falls on both),
# each run `--only fused,wrong --workers 2 --repeats $REPEATS` (default 1) on $DEVICE
# (default cuda), ~40 s a run on the H200. $OUT: every run's .md and .json under old/ and new/, and summary.txt
# (each run's table rows, then every total per side and their medians).
# Run: SCRIPT="benchmarks/eval_speed_ab.sh .old" bash benchmarks/device_run.sh
set -u
OLD=${1:?the older tree (src/, examples/, tests/cheats/candidates/, benchmarks/eval_speed.py)}
[ -n "${KERNELLOOP_BWRAP:-}" ] || source benchmarks/device_env.sh
OUT=${OUT:-/tmp/eval_speed_ab}; mkdir -p "$OUT"
S=$OUT/summary.txt; : > "$S"
for turn in ${TURNS:-old new old new}; do
  tree=.; [ "$turn" = old ] && tree=$OLD
  d=$OUT/$turn; mkdir -p "$d"; s=$(date +%s)
  # the tree's own package first, in this process and in its sandboxed workers (the
  # sandbox passes PYTHONPATH on): never the old judge with the new worker
  PYTHONPATH="$(cd "$tree" && pwd)/src:$PWD/.site" \
    python3 "$tree/benchmarks/eval_speed.py" "$d" --device "${DEVICE:-cuda}" --only fused,wrong \
    --workers 2 --repeats "${REPEATS:-1}" >> "$d/run.txt" 2>&1
  echo "== $turn ($tree) rc=$? $(( $(date +%s) - s ))s" >> "$S"
  grep -h -E "^\| (fused|wrong) " "$(ls -t "$d"/eval-speed-*.md 2>/dev/null | head -1)" >> "$S" 2>/dev/null
done
python3 - "$OUT" >> "$S" 2>&1 <<'PY'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
for turn in ("old", "new"):
    totals = {}
    for f in sorted((out / turn).glob("eval-speed-*.json")):
        for row in json.loads(f.read_text())["runs"]:
            totals.setdefault(row["candidate"], []).append(round(row["total_s"], 1))
    print(turn, {k: f"{v} median {statistics.median(v):.1f} s" for k, v in totals.items()})
PY
cat "$S"
