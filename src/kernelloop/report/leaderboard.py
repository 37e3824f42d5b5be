"""The suite's leaderboard (`kernelloop suite`, issue #17): one row per task from its run
summary, and KernelBench's fast_p over the tasks.

Per task: `correct` — some candidate of the run other than the baseline passed every
correctness check (its evaluation ended `accepted`, or `slower`: correct but not faster
than the best it was timed against); `speedup` — the best's weighted speedup over the
task's baseline (eager PyTorch for a KernelBench problem; 1.0 when nothing was promoted,
None — "not timed" — when no proposal of the run was timed);
`speedup_vs_compiled` — the same best against the task's reference under torch.compile,
timed in the benchmark that made it the best (`kernelloop suite` times it on a GPU; None
where it was not timed); `pct_of_floor`, `rounds`, `cost_usd`, `status`. fast_p: the
fraction of tasks that are correct and whose speedup over eager is more than p (p = 0 is
the fraction correct), as KernelBench defines it, counted only where timings count (a run
under the Triton interpreter is never faster than anything).
"""

from __future__ import annotations

from pathlib import Path

BOARD = "leaderboard.json"  # in the suite's OUT folder, beside leaderboard.md
STATE = "suite.json"  # the suite's state, written after every task


def is_suite(folder: Path) -> bool:
    """A folder `kernelloop suite` wrote (its leaderboard or its state), not a task."""
    return not (folder / "task.toml").exists() and any(
        (folder / name).is_file() for name in (BOARD, STATE)
    )


FAST_P = (0.0, 1.0, 1.5, 2.0)
CORRECT = frozenset({"accepted", "slower"})


def task_row(name: str, summary: dict | None, error: str = "", folder: str = "") -> dict:
    """The leaderboard row of one task from its run summary (None: it never finished)."""
    if summary is None:
        return {"task": name, "status": "not run" if not error else "error", "error": error,
                "correct": False, "speedup": None, "speedup_vs_compiled": None,
                "pct_of_floor": None, "rounds": 0,
                "cost_usd": 0.0, "timings_count": False, "folder": folder}  # fmt: skip
    attempts = summary.get("attempts", [])
    correct = any(a.get("category") in CORRECT and a.get("status") == "evaluated" for a in attempts)
    costs = summary.get("model_costs") or {}  # model -> {calls, tokens, cost_usd, …}
    cost = sum(float(c.get("cost_usd") or 0.0) for c in costs.values())
    # A speedup stands only where some proposal of the run was timed: on the CPU an
    # interpreted Triton kernel is correct but never timed, and the best stays the baseline
    # at its definitional 1.0x — a number nobody measured (a CPU suite printed "correct:
    # yes, 1.000x" for all twelve shared problems, 2026-12-03).
    timed = any(a.get("objective_vs_baseline") is not None for a in attempts)
    measured = bool(summary.get("timings_count", False)) and timed
    # "no" would read as wrong where no proposal was judged at all: each one failed
    # through no fault of its own (on the H200, level1/36's solution was refused twice by
    # the memory plan and the board said "correct: no", 2026-12-05)
    judged = any(a.get("status") == "evaluated" for a in attempts)
    infra = next((a.get("infra_reason") for a in attempts if a.get("infra_reason")), "")
    vs_compiled = summary.get("best_speedup_vs_compiled") if measured else None
    return {
        "task": name,
        "status": summary.get("status", "?"),
        "error": error,
        "correct": correct,
        "speedup": summary.get("best_objective_vs_baseline") if measured else None,
        "speedup_vs_compiled": vs_compiled,
        # why there is no speedup over torch.compile, where the run measured a best
        "compiled_why": (summary.get("best_compiled_why") or "")
        if measured and vs_compiled is None
        else "",
        "not_judged": "" if correct or judged else infra,
        "pct_of_floor": summary.get("best_pct_of_floor") if measured else None,
        "rounds": max((int(a.get("round") or 0) for a in attempts), default=0),
        "cost_usd": round(cost, 4),
        "timings_count": measured,
        "run_id": summary.get("run_id"),
        "reason": summary.get("reason", ""),  # why the run stopped
        "wall_s": summary.get("wall_s"),
        "folder": folder,
    }


def fast_p(rows: list[dict], ps: tuple[float, ...] = FAST_P) -> dict[str, float]:
    """{"fast_0": …, "fast_1": …, …}: fraction of all tasks correct and faster than p."""
    n = len(rows)

    def ok(r: dict, p: float) -> bool:
        if not r["correct"]:
            return False
        if p == 0:
            return True
        return bool(r["timings_count"]) and (r["speedup"] or 0.0) > p

    return {f"fast_{p:g}": (sum(ok(r, p) for r in rows) / n if n else 0.0) for p in ps}


def leaderboard(rows: list[dict]) -> dict:
    return {"tasks": rows, "fast_p": fast_p(rows), "n_tasks": len(rows)}


def markdown(board: dict) -> str:
    lines = [
        "# Leaderboard",
        "",
        "| task | status | correct | speedup over eager | speedup over torch.compile "
        "| % of floor | rounds | cost (USD) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in board["tasks"]:
        speed = f"{r['speedup']:.3f}x" if r["speedup"] is not None else "-"
        if r["speedup"] is None and r["correct"] and not r["timings_count"]:
            speed = "not timed"
        vs_compiled = r.get("speedup_vs_compiled")
        compiled = f"{vs_compiled:.3f}x" if vs_compiled is not None else "-"
        if not r["timings_count"]:
            speed += " (unmeasured)" if r["speedup"] is not None else ""
            compiled += " (unmeasured)" if vs_compiled is not None else ""
        pct = f"{r['pct_of_floor']:.1f}%" if r["pct_of_floor"] else "-"
        status = r["status"] + (f": {r['error'][:80]}" if r["error"] else "")
        correct = "yes" if r["correct"] else "not judged" if r.get("not_judged") else "no"
        lines.append(
            f"| {r['task']} | {status} | {correct} | {speed} | {compiled} "
            f"| {pct} | {r['rounds']} | {r['cost_usd']:.4f} |"
        )
    fp = board["fast_p"]
    lines += [
        "",
        "fast_p (fraction of tasks correct and more than p× faster than eager): "
        + ", ".join(f"p={k.split('_')[1]}: {v:.2f}" for k, v in fp.items()),
        "",
    ]
    notes = [f"- {r['task']}: not judged — {r['not_judged']}" for r in board["tasks"]
             if r.get("not_judged")]  # fmt: skip
    notes += [f"- {r['task']}: no speedup over torch.compile — {r['compiled_why']}"
              for r in board["tasks"] if r.get("compiled_why")]  # fmt: skip
    if notes:
        lines += ["Why a cell is empty:", "", *notes, ""]
    return "\n".join(lines)
