"""What a reviewer approves and how to check it again (issue 36): the best's code diff
against the baseline and against its parent, every proposal's commit with the command
that reproduces its correctness verdict, and the run's interruptions (Ctrl-C) with the
time it spent stopped, so its timestamps add up."""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass
from typing import Any

from kernelloop.report.records import RunRecords
from kernelloop.report.sections import _ts, label, verdict_word

MAX_DIFF_LINES = 400  # a longer diff is cut (the commits hold it whole)


@dataclass(frozen=True)
class Repro:
    """How to fetch a proposal's source and evaluate it again, as the run did."""

    cli: str  # how kernelloop is run here (`.venv/bin/kernelloop`, `python -m kernelloop`)
    task: str  # the task folder as the user passed it
    repo: str  # the git repository of the task's variants
    kernel_path: str  # the kernel file's path inside it
    workspace: str | None = None


def diffs(rr: RunRecords, parent_source: str | None) -> list[dict[str, Any]]:
    """The best against the baseline, and against its parent where that is another
    variant; [] while the best is the baseline."""
    best, base = rr.best, rr.baseline
    if best is None or base is None or best.id == base.id:
        return []
    out = [_diff(f"baseline #{base.id}", f"best #{best.id}", base.source, best.source)]
    if parent_source is not None and best.parent_id not in (None, base.id):
        out.append(
            _diff(f"parent #{best.parent_id}", f"best #{best.id}", parent_source, best.source)
        )
    return out


def _diff(a_name: str, b_name: str, a: str, b: str) -> dict[str, Any]:
    lines = list(
        difflib.unified_diff(
            a.splitlines(), b.splitlines(), fromfile=a_name, tofile=b_name, lineterm=""
        )
    )
    cut = len(lines) > MAX_DIFF_LINES
    added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    return {
        "title": f"{b_name} against {a_name}",
        "text": "\n".join(lines[:MAX_DIFF_LINES]) or "(identical sources)",
        "stat": f"+{added} −{removed} lines" + (f", first {MAX_DIFF_LINES} shown" if cut else ""),
    }


def proposals(rr: RunRecords, repro: Repro | None) -> list[dict[str, Any]]:
    """Every proposal of the run: its commit and the command reproducing its verdict."""
    cfg = rr.config
    out = []
    for a in rr.attempts:
        cmd = ""
        if repro is not None and a.commit_sha:
            file = f"kl-{a.id}.py"
            evaluate = [*shlex.split(repro.cli), "evaluate", repro.task, file]
            for flag in ("device", "shapes", "dtypes"):
                if cfg.get(flag):
                    value = cfg[flag]
                    evaluate += [f"--{flag}", ",".join(value) if isinstance(value, list) else value]
            show = ["git", "-C", repro.repo, "show", f"{a.commit_sha}:{repro.kernel_path}"]
            cmd = f"{shlex.join(show)} > {file} && {shlex.join(evaluate)}"
        out.append(
            {
                "id": a.id,
                "label": label(a),
                "state": verdict_word(a),
                "commit": a.commit_sha[:12] if a.commit_sha else "—",
                "command": cmd or "—",
            }
        )
    return out


def interruptions(rr: RunRecords) -> list[dict[str, Any]]:
    """Each stop (a Ctrl-C, or a crash `--resume` found: kill -9, a lost machine): the
    round it stopped, what stopped it, when (a crash: its last heartbeat), how long the
    stretch before it ran, when it was resumed, seconds stopped."""
    out = []
    for i in rr.interruptions:
        at, back = _ts(i.get("at")), _ts(i.get("resumed_at"))
        kind = i.get("kind") or "ctrl-c"
        out.append(
            {
                "round": i.get("round"),
                "kind": "Ctrl-C" if kind == "ctrl-c" else "crash (killed; last heartbeat)",
                "at": i.get("at"),
                "ran_s": i.get("ran_s"),
                "resumed_at": i.get("resumed_at") or "not resumed",
                "stopped_s": (back - at).total_seconds() if at and back else None,
            }
        )
    return out
