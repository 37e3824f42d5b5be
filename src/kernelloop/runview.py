"""What a person sees while `kernelloop run` works, and the summary it leaves behind."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kernelloop.evaluate.trusted.record import EvaluationRecord
from kernelloop.objective import weighted_geomean

if TYPE_CHECKING:
    from kernelloop.step import Best


def context_profile(record: EvaluationRecord | None) -> str:
    """A compact plain-text view of the best's evaluation for the agent's prompt.

    Used when no profiler summary is available: compile facts, timings, floor distance.
    """
    if record is None:
        return "No profile available yet (resumed run): evaluate the best again to see its numbers."
    env = record.environment
    lines = [f"Device: {env.device_name} ({env.device}); timings {'count' if record.timings_count else 'are interpreter timings and do not count'}."]
    lines.append(f"Kernel launches per call: {record.kernel_launches_per_call}.")
    seen = set()
    for k in record.kernels:
        key = (k.name, k.n_regs, k.n_spills, k.num_warps)
        if key in seen:
            continue
        seen.add(key)
        lines.append(f"Kernel {k.name}: {k.n_regs} registers/thread, {k.n_spills} spills, "
                     f"{k.shared_bytes} B shared, {k.num_warps} warps.")
    for t in record.timings:
        if t.impl == "candidate":
            floor = f", {t.pct_of_floor:.1f}% of the roofline floor" if t.pct_of_floor else ""
            lines.append(f"Shape {t.shape} {t.dtype}: median {t.median_ms:.4f} ms (p20–p80 {t.p20_ms:.4f}–{t.p80_ms:.4f}){floor}.")
    lines.append("Missing: hardware counters (Nsight Compute was not run for this summary).")
    return "\n".join(lines)


def shape_table(bench, gate) -> list[dict]:
    """Per shape of a benchmark: the candidate's median, the baseline's, the speedup over
    the baseline and the % of the minimal-traffic floor (what the run summary reports)."""
    return shape_rows(bench.model_dump(mode="json"), gate.model_dump(mode="json") if gate is not None else None)


def shape_rows(bench: dict, gate: dict | None) -> list[dict]:
    """`shape_table` over stored JSON (a benchmark record and gate verdict as plain dicts);
    a field an older record lacks reads None."""
    by_gate = {g.get("shape"): g for g in (gate or {}).get("shapes") or [] if isinstance(g, dict)}
    rows = []
    for sb in bench.get("shapes") or []:
        impls = sb.get("impls") or {}
        cand, base, g = impls.get("candidate") or {}, impls.get("baseline") or {}, by_gate.get(sb.get("shape")) or {}
        rows.append({
            "shape": sb.get("shape"), "dtype": sb.get("dtype"), "tag": sb.get("tag"), "weight": sb.get("weight"),
            "median_ms": cand.get("median_ms"), "baseline_ms": base.get("median_ms"),
            "floor_ms": sb.get("floor_ms"), "speedup_vs_baseline": g.get("speedup_vs_baseline"),
            "pct_of_floor": cand.get("pct_of_floor"), "noise_rel": sb.get("noise_rel"),
        })
    return rows


def floor_pct(task, rows: list[dict]) -> float | None:
    """The weighted geometric mean of a shape table's % of floor (None without floors)."""
    return weighted_geomean(task, {r["shape"]: r["pct_of_floor"] for r in rows if r.get("pct_of_floor")})


def _best_text(best: Best) -> str:
    """The header's part about the best: speedup, time on the most heavily weighted
    shape, % of floor."""
    text = f" · best {best.objective:.3f}x over baseline"
    if rows := [r for r in best.shapes if r.get("median_ms")]:
        top = max(rows, key=lambda r: r["weight"])
        text += f" · {top['median_ms']:.3f} ms on {top['shape']}"
    if best.pct_of_floor:
        text += f" · {best.pct_of_floor:.1f}% of floor"
    return text


@dataclass
class RunView:
    console: Console = field(default_factory=Console)
    live_enabled: bool = True
    rows: list[tuple] = field(default_factory=list)
    header: str = ""
    _status: str = ""
    _live: Live | None = None

    def _render(self) -> Group:
        table = Table("round", "k", "agent", "hypothesis", "state", "note", expand=True)
        for r in self.rows[-14:]:
            table.add_row(*r)
        return Group(Text(self.header, style="bold"), table, Text(self._status, style="dim"))

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def start(self, task, agent_name: str, device: str, best: Best) -> None:
        self.header = f"{task.name} · agent {agent_name} · {device}{_best_text(best)}"
        if self.live_enabled and self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4)
            self._live.start()
        else:
            self.console.print(self.header)

    def status(self, message: str) -> None:
        self._status = message
        self._refresh()

    def candidate(self, r: int, k: int, prop, state: str, note: str) -> None:
        colour = {"accepted": "green", "rejected": "red", "refused": "yellow"}.get(state, "cyan")
        row = (str(r), str(k), prop.agent or "-", prop.hypothesis[:70], f"[{colour}]{state}[/]", note[:90])
        if self.rows and self.rows[-1][:2] == row[:2]:
            self.rows[-1] = row
        else:
            self.rows.append(row)
        if self._live is None and state != "evaluating":
            self.console.print(f"round {r}.{k} {state}: {prop.hypothesis[:80]} — {note[:120]}")
        self._refresh()

    def round_done(self, r: int, best: Best, gain: float) -> None:
        self.header = f"{self.header.split(' · best')[0]}{_best_text(best)}"
        self.status(f"round {r} done, gain {gain:.2%}")

    def summary(self, task, store, run_id: int, best: Best, status: str, why: str, wall_s: float) -> dict:
        if self._live is not None:
            self._live.stop()
            self._live = None
        costs = store.cost_by_model(run_id)
        summary = {
            "task": task.name,
            "run_id": run_id,
            "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "status": status,
            "reason": why,
            "best_proposal_id": best.pid,
            "best_objective_vs_baseline": best.objective,
            "best_pct_of_floor": best.pct_of_floor,
            "wall_s": round(wall_s, 1),
            "attempts": [list(r) for r in self.rows],
            "model_costs": costs if isinstance(costs, dict | list) else str(costs),
        }
        if best.record is not None:
            summary["timings_count"] = best.record.timings_count
        if best.shapes:
            summary["best_per_shape"] = best.shapes
        table = Table("round", "k", "agent", "hypothesis", "state", "note", title=f"{task.name}: {status}")
        for r in self.rows:
            table.add_row(*r)
        self.console.print(table)
        if best.shapes:
            self.console.print(_shape_table(best.shapes))
        self.console.print(f"[bold]{status}[/]: {why}")
        floor = f", {best.pct_of_floor:.1f}% of floor" if best.pct_of_floor else ""
        self.console.print(f"best: proposal {best.pid}, {best.objective:.3f}x over the baseline{floor} · {wall_s:.0f} s")
        return summary


def _shape_table(rows: list[dict]) -> Table:
    t = Table("shape", "dtype", "tag", "best ms", "baseline ms", "speedup", "% of floor", title="best, per shape")
    fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        t.add_row(r["shape"], r["dtype"], r["tag"], fmt(r["median_ms"], ".4f"), fmt(r["baseline_ms"], ".4f"),
                  fmt(r["speedup_vs_baseline"], ".3f") + ("x" if r["speedup_vs_baseline"] else ""),
                  fmt(r["pct_of_floor"], ".1f"))
    return t
