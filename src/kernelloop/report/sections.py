"""The report's sections as plain data (numbers and short texts), computed from the records.

Templates only lay these out, so what the Markdown and the HTML say is the same, and the
tests can check the numbers against the stored records without parsing a page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import kernelloop
from kernelloop import objective
from kernelloop.history.models import NOT_TIMED, PROMOTED, Attempt
from kernelloop.profile.deltas import TRACKED, fmt_value
from kernelloop.report.records import RunRecords

NONE = "–"


def _ts(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _kernelloop_version() -> str:
    """The running code's version (also right when run from a source tree, not installed)."""
    return kernelloop.__version__


def label(a: Attempt) -> str:
    return "baseline" if a.round == 0 else f"r{a.round}-{a.k}"


def state(a: Attempt) -> str:
    """The chart's marker: baseline | promoted | correct (judged correct, not promoted or
    not timed) | rejected | refused | infrastructure | pending."""
    if a.status in ("refused", "infrastructure"):
        return a.status
    if a.accepted is None:
        return "pending"
    if a.round == 0:
        return "baseline"
    if not a.accepted:
        return "rejected"
    return "promoted" if a.outcome == PROMOTED else "correct"


def verdict_word(a: Attempt) -> str:
    """The tables' verdict: the outcome in the one vocabulary (task/words.py), as the live
    view, `history` and `--json` say it. A real CPU run's report once called a correct
    candidate never timed "accepted", which reads as passing the performance gate."""
    return a.outcome


def header(rr: RunRecords, generated_at: str) -> dict[str, Any]:
    """Task, device, versions, dates, agent and how the run ended."""
    env: dict[str, Any] = {}
    for a in (rr.best, rr.baseline):
        rec = rr.stored.get(a.id).record if a and a.id in rr.stored else None
        if rec and isinstance(rec.get("environment"), dict):
            env = rec["environment"]
            break
    versions = [f"kernelloop {_kernelloop_version()}"]
    versions += [f"{k} {env[k]}" for k in ("torch", "triton", "cuda", "python") if env.get(k)]
    device = rr.run.get("device_name") or env.get("device_name") or NONE
    if env.get("device"):
        device += f" ({env['device']}{', Triton interpreter' if env.get('interpreter') else ''})"
    if rr.run.get("arch"):
        device += f", arch {rr.run['arch']}"
    if env.get("driver"):
        device += f", driver {env['driver']}"
    start, end = _ts(rr.run.get("started_at")), _ts(rr.run.get("finished_at"))
    return {
        "task": rr.task,
        "run_id": rr.run_id,
        "agent": rr.run.get("agent") or NONE,
        "device": device,
        "versions": ", ".join(versions),
        "sandbox": env.get("sandbox") or NONE,
        "started_at": rr.run.get("started_at") or NONE,
        "finished_at": rr.run.get("finished_at") or "not finished",
        # The loop's own clock: the run row is stamped only after the baseline's evaluation
        # (25 s of a 91 s CPU run), so the stamps undercount; they are the fallback.
        "wall_s": rr.summary.get("wall_s")
        or ((end - start).total_seconds() if start and end else None),
        "status": rr.run.get("status") or NONE,
        "reason": rr.summary.get("reason") or "",
        "generated_at": generated_at,
    }


@dataclass(frozen=True)
class Point:
    """One proposal on the per-round chart."""

    pid: int
    label: str
    round: int
    k: int
    state: str
    objective: float | None  # speedup over the baseline; None: not measured
    hypothesis: str
    verdict: str = ""  # the tables' word (`verdict_word`); `state` picks the chart's marker


def points(rr: RunRecords) -> list[Point]:
    return [
        Point(a.id, label(a), a.round, a.k, state(a), a.objective, a.hypothesis, verdict_word(a))
        for a in rr.attempts
    ]


def best_so_far(rr: RunRecords) -> list[tuple[int, float]]:
    """(round, objective) each time the best moved, from the evaluations that became best."""
    out: list[tuple[int, float]] = []
    for a in rr.attempts:
        if a.was_best and a.objective is not None and (not out or a.objective >= out[-1][1]):
            out.append((a.round, a.objective))
    return out


def shape_rows(rr: RunRecords) -> list[dict[str, Any]]:
    """Per shape of the best's benchmark record: its median, the baseline's (timed beside
    it in the same rounds), the gate's speedup over the baseline, % of the floor of both."""
    best = rr.best
    s = rr.stored.get(best.id) if best else None
    if s is None or s.bench is None:
        return []
    rows = objective.shape_rows(s.bench, s.gate)
    for row, sb in zip(rows, s.bench.get("shapes") or [], strict=True):
        row.setdefault("compiled_ms", None)  # the torch.compile slot, where it was timed
        row.setdefault("speedup_vs_compiled", None)
        row["baseline_pct_of_floor"] = ((sb.get("impls") or {}).get("baseline") or {}).get(
            "pct_of_floor"
        )
    return rows


def measured_text(rr: RunRecords, a: Attempt) -> str:
    """What was measured for a proposal, in one line."""
    if a.status == "refused":
        return "not evaluated (refused before it cost a benchmark)"
    if a.status == "infrastructure":
        return (
            f"not evaluated: infrastructure failure, not the candidate's fault ({a.infra_reason})"
        )
    if a.accepted is None:
        return "not evaluated (in flight when the run stopped)"
    gate = rr.stored[a.id].gate if a.id in rr.stored else None
    if a.objective is None:
        rec = rr.stored[a.id].record if a.id in rr.stored else None
        correct = bool(rec and (rec.get("verdict") or {}).get("accepted"))
        return (
            f"{NOT_TIMED} (timings on this device do not count)"
            if correct
            else "not timed: failed correctness"
        )
    parts = [f"{a.objective:.3f}x over baseline"]
    if gate and gate.get("objective") is not None:
        parts.append(f"{(gate['objective'] - 1) * 100:+.1f}% vs the best it had to beat")
    changes = sorted(a.shape_changes().items(), key=lambda kv: abs(kv[1] - 1), reverse=True)
    if changes:
        parts.append(
            "per shape vs parent: "
            + ", ".join(f"{s} {(r - 1) * 100:+.1f}%" for s, r in changes[:4])
        )
    return "; ".join(parts)


def rounds(rr: RunRecords) -> list[dict[str, Any]]:
    """Per round, its candidates side by side (they were judged against the same best):
    label, verdict, speedup over the baseline, and which one the round promoted."""
    by_round: dict[int, list[Attempt]] = {}
    for a in rr.attempts:
        if a.round > 0:
            by_round.setdefault(a.round, []).append(a)
    out = []
    for r, cands in sorted(by_round.items()):
        cells = []
        for a in sorted(cands, key=lambda a: a.k):
            speed = f" {a.objective:.3f}x" if a.objective is not None else ""
            mark = " ★" if a.was_best else ""
            cells.append(f"{label(a)} #{a.id} {verdict_word(a)}{speed}{mark}")
        out.append({"round": r, "n": len(cands), "candidates": cells})
    return out


def narrative(rr: RunRecords) -> list[dict[str, Any]]:
    """Per variant: the agent's claim and prediction next to what was measured and the verdict."""
    rows = []
    for a in rr.attempts:
        if a.round == 0:
            continue
        reasons = {"refused": [a.refused_reason], "infrastructure": [a.infra_reason]}.get(
            a.status, list(a.reasons)
        )
        rows.append(
            {
                "id": a.id,
                "label": label(a),
                "agent": "/".join(x for x in (a.agent, a.model) if x) or NONE,
                "claim": a.hypothesis or NONE,
                "predicted": a.predicted_effect or "none given",
                "measured": measured_text(rr, a),
                "attribution": a.attribution or NONE,
                "verdict": verdict_word(a) + (" ★ best" if a.id == rr.best_id else ""),
                "reasons": "; ".join(r for r in reasons if r) or NONE,
            }
        )
    return rows


_TRACKED = {t.field: t for t in TRACKED}


def _delta_row(a: Attempt, d: dict[str, Any], source: str) -> dict[str, Any]:
    unit = d.get("unit") or ""
    before, after = float(d["before"]), float(d["after"])
    return {
        "id": a.id,
        "label": label(a),
        "kernel": d.get("kernel") or "all",
        "metric": d.get("label") or d["metric"],
        "before": fmt_value(before, unit),
        "after": fmt_value(after, unit),
        "regression": bool(d.get("regression")) and d.get("metric") != "duration_us",
        "source": source,
    }


def metric_deltas(rr: RunRecords) -> list[dict[str, Any]]:
    """Deltas against the parent from the stored profile summaries (Nsight Compute or the
    compile-fact fallback) and from the evaluation rows; secondary regressions flagged."""
    rows = []
    for a in rr.attempts:
        report = (rr.profiles.get(a.id) or {}).get("report") or {}
        for d in report.get("deltas") or []:
            if isinstance(d, dict) and {"before", "after", "metric"} <= d.keys():
                rows.append(_delta_row(a, d, f"profile ({report.get('source', '?')})"))
        for name, (before, after) in a.metric_deltas.items():
            t = _TRACKED.get(name)
            worse = t is not None and (after > before if t.better == "lower" else after < before)
            rows.append(
                _delta_row(
                    a,
                    {
                        "metric": name,
                        "label": t.label if t else name,
                        "before": before,
                        "after": after,
                        "unit": t.unit if t else "",
                        "regression": worse,
                    },
                    "evaluation",
                )
            )
    return rows


def cost_ledger(rr: RunRecords, wall_s: float | None) -> dict[str, Any]:
    """Model spend per model and per round, device time from the records, wall time."""
    per_model: dict[str, dict[str, float]] = {}
    per_round: dict[int, dict[str, float]] = {}
    for c in rr.model_calls:
        for key, bucket in ((c["model"], per_model), (c["round"], per_round)):
            row = bucket.setdefault(
                key,
                {
                    "calls": 0,
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cost_usd": 0.0,
                    "latency_s": 0.0,
                },
            )
            row["calls"] += 1
            for f in ("input_tokens", "output_tokens", "cost_usd", "latency_s"):
                row[f] += c[f] or 0
    correctness_s = bench_s = 0.0
    devices = set()
    for s in rr.stored.values():
        if s.record:
            correctness_s += float(s.record.get("wall_s") or 0.0)
            devices.add((s.record.get("environment") or {}).get("device") or "?")
        if s.bench:
            bench_s += float(s.bench.get("wall_s") or 0.0)
    return {
        "per_model": per_model,
        "per_round": dict(sorted(per_round.items())),
        "total": {
            f: sum(r[f] for r in per_model.values())
            for f in ("calls", "input_tokens", "output_tokens", "cost_usd", "latency_s")
        },
        "has_calls": bool(rr.model_calls),
        "agent": rr.run.get("agent") or NONE,
        "device": ", ".join(sorted(devices)) or NONE,
        "correctness_s": correctness_s,
        "bench_s": bench_s,
        "evaluations": len(rr.stored),
        "wall_s": wall_s,
    }
