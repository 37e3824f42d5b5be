"""A stratified sample of KernelBench problems for the self-survey (issue 46).

Copies, from a KernelBench repository (a work tree, or a bare/mirror git directory read at
HEAD), every STEP-th problem of each level by problem number (level1 and level2 every 4th
from 1, level3 every 5th from 1: 25 + 25 + 10) plus the issue's eight problems (level1/4,
35, 42, 90, 99; level2/18, 66; level3/43), into OUT/levelN/. The selection depends on the
numbers only, so two checkouts of the same KernelBench give the same sample.

    python3 benchmarks/kernelbench_sample.py REPO OUT
    kernelloop import kernelbench OUT --out TASKS --check --device cuda
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

STEPS = {"level1": 4, "level2": 4, "level3": 5}
ISSUE = {"level1": {4, 35, 42, 90, 99}, "level2": {18, 66}, "level3": {43}}


def listing(repo: Path) -> dict[str, str]:
    """Path inside the repository -> text, for every level1-3 problem file."""
    if (repo / "KernelBench").is_dir():
        return {
            str(p.relative_to(repo)): p.read_text()
            for p in sorted((repo / "KernelBench").glob("level[123]/*.py"))
        }
    names = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD", "KernelBench"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {
        n: subprocess.run(
            ["git", "-C", str(repo), "show", f"HEAD:{n}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for n in names
        if re.fullmatch(r"KernelBench/level[123]/\d+_.*\.py", n)
    }


def chosen(path: str) -> bool:
    level, name = path.split("/")[-2:]
    number = int(name.split("_", 1)[0])
    return (number - 1) % STEPS[level] == 0 or number in ISSUE[level]


def main(repo: Path, out: Path) -> int:
    files = {p: t for p, t in listing(repo).items() if chosen(p)}
    for path, text in files.items():
        level, name = path.split("/")[-2:]
        (out / level).mkdir(parents=True, exist_ok=True)
        (out / level / name).write_text(text)
    counts = {lv: sum(p.split("/")[-2] == lv for p in files) for lv in STEPS}
    print(f"{len(files)} problems into {out}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
