"""Merge the leaderboards of several `benchmarks/kernelbench_suite.sh` calls (the twelve
problems may take two device calls: ONLY=...) into one board, fast_p recomputed over all
rows. A task on several boards keeps its row from the last one given.

    python3 benchmarks/kernelbench_board_merge.py OUT1 OUT2 --out benchmarks/results/DIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kernelloop.report.leaderboard import BOARD, leaderboard, markdown


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("boards", nargs="+", type=Path, help="folders holding leaderboard.json")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows: dict[str, dict] = {}
    for folder in args.boards:
        for row in json.loads((folder / BOARD).read_text())["tasks"]:
            rows[row["task"]] = row
    board = leaderboard([rows[k] for k in sorted(rows)])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / BOARD).write_text(json.dumps(board, indent=2))
    (args.out / "leaderboard.md").write_text(markdown(board))
    print(markdown(board))


if __name__ == "__main__":
    main()
