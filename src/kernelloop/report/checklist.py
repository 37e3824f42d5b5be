"""The review checklist: what a reviewer must be able to tick before merging the best,
each item computed from the stored records and shown with its evidence.

An item is `pass`, `fail` or `n/a` (the records cannot say, e.g. no second timer on a
CPU); n/a is never counted as a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from kernelloop.report.records import RunRecords
from kernelloop.report.sections import metric_deltas, shape_rows
from kernelloop.task import words
from kernelloop.task.spec import Rules

State = Literal["pass", "fail", "n/a"]


@dataclass(frozen=True)
class Item:
    name: str
    state: State
    evidence: str


def _record_item(rr: RunRecords) -> Item:
    name = (
        "The best carries its benchmark record and a gate verdict of faster by the gate's "
        "margin (no record, no merge)"
    )
    best = rr.best
    if best is None:
        return Item(name, "fail", "the run recorded no best")
    s = rr.stored.get(best.id)
    if s is None or s.record is None:
        return Item(name, "fail", f"#{best.id} has no stored evaluation record")
    if best.round == 0:
        return Item(name, "n/a", "the best is still the baseline: nothing was promoted in this run")
    if s.bench is None or s.gate is None:
        return Item(name, "fail", f"#{best.id} has no stored benchmark record or gate verdict")
    ok = bool(s.gate.get("accepted"))
    return Item(
        name,
        "pass" if ok else "fail",
        f"#{best.id}: gate {words.gate_word(ok)}"
        f"{'' if ok else ' (' + str(s.gate.get('category', '?')) + ')'}, "
        f"benchmark on {s.bench.get('device_name', '?')} started {s.bench.get('started_at', '?')}",
    )


def _suites_item(rr: RunRecords) -> Item:
    name = "Every correctness suite of the best is green"
    best = rr.best
    rec = rr.stored[best.id].record if best and best.id in rr.stored else None
    checks = [c for c in (rec or {}).get("checks") or [] if isinstance(c, dict)]
    if not checks:
        return Item(name, "fail", "no correctness checks are stored for the best")
    suites: dict[str, list[int]] = {}
    for c in checks:
        n = suites.setdefault(str(c.get("suite")), [0, 0])
        n[0] += 1
        n[1] += 0 if c.get("passed") else 1
    failed = sum(f for _, f in suites.values())
    text = ", ".join(f"{s} {n - f}/{n}" for s, (n, f) in suites.items())
    return Item(name, "fail" if failed else "pass", f"{text} checks passed")


def _e2e_item(rr: RunRecords) -> Item:
    """The task's `[e2e]` model check (docs/task.md), as the best's record has it."""
    name = "The best passed the task's end-to-end model check"
    best = rr.best
    rec = rr.stored[best.id].record if best and best.id in rr.stored else None
    checks = [
        c
        for c in (rec or {}).get("checks") or []
        if isinstance(c, dict) and c.get("suite") == "e2e"
    ]
    if not checks:
        return Item(name, "n/a", "the best's record has no e2e check (the task has no [e2e])")
    parts = []
    for c in checks:
        err = c.get("max_abs_err")
        shown = f"{err:.3g}" if isinstance(err, int | float) else "?"
        verdict = "passed" if c.get("passed") else "FAILED"
        parts.append(f"{c.get('shape')} {c.get('dtype')} {verdict} (max abs err {shown})")
    failed = any(not c.get("passed") for c in checks)
    return Item(name, "fail" if failed else "pass", "; ".join(parts))


def _noise_item(rr: RunRecords) -> Item:
    name = "The best's gain beats the gate's noise-aware threshold"
    best = rr.best
    gate = rr.stored[best.id].gate if best and best.id in rr.stored else None
    if best is None or best.round == 0:
        return Item(name, "n/a", "nothing was promoted over the baseline")
    if not gate or gate.get("objective") is None or gate.get("required_gain") is None:
        return Item(name, "fail", f"#{best.id} has no gate objective or threshold stored")
    obj, req = float(gate["objective"]), float(gate["required_gain"])
    margin = obj / (1 + req) - 1
    return Item(
        name,
        "pass" if margin >= 0 else "fail",
        f"{obj:.4f}x over the best it replaced; required {1 + req:.4f}x (noise "
        f"{float(gate.get('noise_rel') or 0) * 100:.2f}%); margin {margin * 100:+.1f}%",
    )


def _timer_item(rr: RunRecords) -> Item:
    name = "A second, independent timer agrees with the first"
    best = rr.best
    s = rr.stored.get(best.id) if best else None
    if s is None or s.bench is None or s.gate is None:
        return Item(name, "n/a", "no benchmark record for the best")
    if s.bench.get("device") != "cuda":
        return Item(
            name,
            "n/a",
            f"timed on {s.bench.get('device')}: the profiler's kernel durations "
            "(the second timer) exist only on a GPU",
        )
    shapes = [g for g in s.gate.get("shapes") or [] if isinstance(g, dict)]
    if any(g.get("profiler_speedup_vs_best") is None for g in shapes):
        return Item(name, "fail", "the second timer was unavailable on some shapes")
    bad = [g["shape"] for g in shapes if "timers disagree" in (g.get("flags") or [])]
    detail = ", ".join(
        f"{g['shape']} {g.get('speedup_vs_best', 0):.3f}x vs {g['profiler_speedup_vs_best']:.3f}x"
        for g in shapes
    )
    return Item(
        name,
        "fail" if bad else "pass",
        (f"disagree on {', '.join(bad)}; " if bad else "") + f"events vs profiler: {detail}",
    )


def _counts_item(rr: RunRecords) -> Item:
    name = "The timings count (measured on the device, not in an interpreter)"
    best = rr.best
    s = rr.stored.get(best.id) if best else None
    env = (s.record or {}).get("environment") if s is not None else None
    if s is not None and s.bench is None and isinstance(env, dict) and env.get("interpreter"):
        # A device that cannot time (Triton's interpreter): nothing to tick, nothing failed.
        return Item(name, "n/a", "speed is not measured on this device (Triton interpreter)")
    if s is None or s.bench is None:
        return Item(name, "fail", "no benchmark record: speed was not measured")
    ok = bool(s.bench.get("timings_count"))
    return Item(
        name,
        "pass" if ok else "fail",
        f"{s.bench.get('device_name', '?')} ({s.bench.get('device')}), method "
        f"{s.bench.get('method') or '?'}" + ("" if ok else ", timings do not count"),
    )


def _bytes_item(rr: RunRecords) -> Item:
    name = "Benchmark and correctness records are for the same kernel bytes"
    best = rr.best
    s = rr.stored.get(best.id) if best else None
    if s is None or s.bench is None or s.record is None:
        return Item(name, "n/a", "the best lacks one of the two records")
    a, b = s.record.get("candidate_sha256"), s.bench.get("candidate_sha256")
    return Item(
        name, "pass" if a and a == b else "fail", f"sha256 {str(a)[:16]}… vs {str(b)[:16]}…"
    )


def _approval_item(rr: RunRecords) -> Item:
    name = "No human sign-off is pending (new-architecture guard)"
    if rr.pending_id is not None:
        return Item(
            name,
            "fail",
            f"#{rr.pending_id} awaits sign-off: review it, then run `kernelloop approve TASK`",
        )
    signed = [f"#{a['proposal_id']} by {a['approver']} on {a['arch']}" for a in rr.approvals]
    return Item(
        name,
        "pass",
        "approved: " + ", ".join(signed) if signed else "no best of this run awaits approval",
    )


def _shape_items(rr: RunRecords, rules: Rules) -> list[Item]:
    rows = [r for r in shape_rows(rr) if r["speedup_vs_baseline"] is not None]
    tail_name = f"No long-tail shape below {rules.long_tail_floor:.2f}x the baseline's speed"
    any_name = f"No shape slower than the baseline by more than {rules.max_shape_regression:.0%}"
    if not rows:
        return [
            Item(tail_name, "n/a", "no per-shape speedups stored for the best"),
            Item(any_name, "n/a", "no per-shape speedups stored for the best"),
        ]
    tails = [r for r in rows if r["tag"] == "long_tail"]
    low_tail = [r for r in tails if r["speedup_vs_baseline"] < rules.long_tail_floor]
    slow = [r for r in rows if r["speedup_vs_baseline"] < 1 - rules.max_shape_regression]

    def text(rs: list[dict[str, Any]]) -> str:
        return ", ".join(f"{r['shape']} {r['speedup_vs_baseline']:.3f}x" for r in rs)

    tail = (
        Item(tail_name, "fail" if low_tail else "pass", text(tails))
        if tails
        else Item(tail_name, "n/a", "the benchmark has no long-tail shape")
    )
    return [tail, Item(any_name, "fail" if slow else "pass", text(slow if slow else rows))]


def _metrics_item(rr: RunRecords) -> Item:
    name = "No secondary metric regressed against the parent"
    rows = metric_deltas(rr)
    if not rows:
        return Item(name, "n/a", "no profile metric deltas are stored for this run")
    bad = [r for r in rows if r["regression"]]
    if bad:
        return Item(
            name,
            "fail",
            "; ".join(f"{r['label']} {r['metric']} {r['before']} → {r['after']}" for r in bad),
        )
    return Item(name, "pass", f"{len(rows)} deltas, none a regression")


def _stop_item(rr: RunRecords) -> Item:
    name = "The run ended without calling for review"
    status, reason = rr.run.get("status") or "?", rr.summary.get("reason") or ""
    if status == "running":
        return Item(
            name,
            "fail",
            "the run has not finished (still running, or killed: `kernelloop run --resume`)",
        )
    return Item(
        name,
        "fail" if status == "needs review" else "pass",
        f"{status}" + (f": {reason}" if reason else ""),
    )


def checklist(rr: RunRecords, rules: Rules) -> list[Item]:
    return [
        _record_item(rr),
        _suites_item(rr),
        _e2e_item(rr),
        _counts_item(rr),
        _bytes_item(rr),
        _noise_item(rr),
        _timer_item(rr),
        *_shape_items(rr, rules),
        _metrics_item(rr),
        _approval_item(rr),
        _stop_item(rr),
    ]
