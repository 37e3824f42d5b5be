"""survey.json (`kernelloop import kernelbench DIR --check`) as a Markdown table.

    python3 benchmarks/survey_table.py SURVEY.json [SURVEY.json ...] > table.md

Several files (a survey split over device calls) are merged in order, a problem's last
row kept. The header names the machine, versions and date of each file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def table(paths: list[Path]) -> str:
    rows: dict[str, dict] = {}
    heads = []
    for p in paths:
        doc = json.loads(p.read_text())
        heads.append(
            f"- `{p}`: {doc['date']}, {doc['device']} {doc.get('device_name') or ''}, "
            f"kernelloop {doc['kernelloop']}, torch {doc['torch']}, Python {doc['python']}: "
            f"{doc['passed']} of {doc['problems']} passed every check"
        )
        for r in doc["rows"]:
            rows[r["task"] or r["problem"]] = r  # the task's name carries the level
    passed = sum(r["passed"] for r in rows.values())
    out = [*heads, "", f"**{passed} of {len(rows)} problems passed every check.**", ""]
    checks = sorted({k for r in rows.values() for k in r["checks"]}, key=_order)
    out.append("| problem | " + " | ".join(checks) + " | s | failed because |")
    out.append("|---" * (len(checks) + 3) + "|")
    for name in sorted(rows, key=_problem_order):
        r = rows[name]
        marks = [_mark(r["checks"].get(k)) for k in checks]
        why = "" if r["passed"] else r["line"].replace("|", "/")[:300]
        out.append(f"| {name} | " + " | ".join(marks) + f" | {r['seconds']:.0f} | {why} |")
    return "\n".join(out) + "\n"


def _mark(v: str | None) -> str:
    if v is None:
        return ""
    return "ok" if v == "ok" else ("-" if v.startswith("not run") else "FAIL")


ORDER = ("imported", "judged", "regions", "memory plan", "A/A", "events vs profiler", "floor")


def _order(k: str) -> int:
    return ORDER.index(k) if k in ORDER else len(ORDER)


def _problem_order(name: str) -> tuple:
    level, _, file = name.replace("/", "_").partition("_")  # level1_19_ReLU, level1/19_ReLU.py
    head = file.split("_", 1)[0]
    return (level, int(head) if head.isdigit() else 1 << 30, file)


if __name__ == "__main__":
    sys.stdout.write(table([Path(a) for a in sys.argv[1:]]))
