"""The run an external coding agent (Claude Code, Codex, …) drives through `kernelloop mcp`.

Each `submit` is one round of the loop with one proposal, through the same step as
`kernelloop run` (`step.py`): policy pre-checks and duplicate refusal, a git-versioned
variant, the sandboxed evaluation, the benchmark and gate where timings count, the history
record and the best's promotion rules. The round budget, the time cap and the stall rule
apply as they do in the loop. Candidate source is only ever written to a file for the
sandboxed worker: this process never imports it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from kernelloop.agents.base import Proposal
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.run import resolve_device, select_shapes, timings_count
from kernelloop.history import open_task_memory
from kernelloop.history.models import Attempt
from kernelloop.loop import Options
from kernelloop.policy import bound_check, budget_check, rules_text, stall_check
from kernelloop.profile.budget import ProfileBudget
from kernelloop.runview import RunView, context_profile
from kernelloop.step import (
    UNMEASURED,
    Best,
    adopt,
    make_evaluator,
    one_proposal,
    profile_best,
    start_run,
)
from kernelloop.task import Task

AGENT_NAME = "external"


@dataclass
class ExternalAgent:
    """The external agent as the loop's step sees it: it proposes through `submit`, and the
    step tells it each outcome (kept for the reply)."""

    name: str = AGENT_NAME
    last_outcome: str = ""

    def propose(self, context) -> list[Proposal]:  # the external agent proposes through submit
        return []

    def observe(self, proposal: Proposal, outcome: str) -> None:
        self.last_outcome = outcome


@dataclass
class ProgressView(RunView):
    """The loop's view, printing to stderr (stdout carries the MCP protocol), with each
    status line also handed to the caller of the operation in progress."""

    console: Console = field(default_factory=lambda: Console(file=sys.stderr, soft_wrap=True))
    live_enabled: bool = False
    on_status: Callable[[str], None] | None = None

    def status(self, message: str) -> None:
        super().status(message)
        if self.on_status is not None:
            self.on_status(message)


def attempt_dict(a: Attempt) -> dict:
    """One history row as the external agent reads it."""
    return {
        "id": a.id, "run": a.run_id, "round": a.round, "agent": a.agent, "claim": a.hypothesis,
        "prediction": a.predicted_effect, "status": a.status, "accepted": a.accepted, "category": a.category,
        "reasons": list(a.reasons), "refused_reason": a.refused_reason, "objective_vs_baseline": a.objective,
        "gain_vs_parent": a.gain, "per_shape_vs_baseline": a.per_shape, "commit": a.commit_sha or None,
        "branch": a.branch or None, "was_best": a.was_best,
    }


class ExternalSession:
    """One run of one task, driven call by call. Operations are serialized (one evaluation
    at a time); each opens the history in its own thread, as SQLite connections are
    per-thread."""

    def __init__(self, task: Task, opts: Options) -> None:
        self.task, self.opts = task, opts
        self.device = resolve_device(opts.device)
        # As in the loop: speed counts on a GPU and for plain-PyTorch tasks, never in Triton's interpreter.
        self.measured = timings_count(self.device, False, task.spec.task.language)
        rules = task.spec.rules
        self.last_round = min(rules.max_rounds, opts.rounds or rules.max_rounds)
        self.agent = ExternalAgent()
        self.view = ProgressView()
        self.scratch = Path(tempfile.mkdtemp(prefix="kernelloop-mcp-"))
        self.run_id: int | None = None
        self.arch = ""
        self.best: Best | None = None
        self.round = 0
        self.gains: list[float] = []
        self.status: str | None = None  # set when the run has stopped
        self.why = ""
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self.profiles = ProfileBudget.for_run(rules, self.last_round)  # profile/budget.py

    # ---- plumbing ------------------------------------------------------------------
    @contextmanager
    def _memory(self, progress: Callable[[str], None] | None = None, *, write: bool = True) -> Iterator[tuple]:
        """The history and versions for one operation; writers take turns, readers
        (history, variant) do not wait for an evaluation in progress."""
        with self._lock if write else contextlib.nullcontext():
            if write:
                self.view.on_status = progress
            store, versions = open_task_memory(self.task, self.opts.workspace)
            try:
                yield store, versions
            finally:
                store.close()
                if write:
                    self.view.on_status = None

    def _evaluator(self):
        return make_evaluator(self.task, self.device, self.measured, self.scratch, shapes=self.opts.shapes,
                              dtypes=self.opts.dtypes, sandbox=self.opts.sandbox, view=self.view)

    def _ensure_run(self, store, versions) -> Best:
        """Round 0 on first need: the baseline evaluated, versioned, recorded and profiled."""
        if self.best is None:
            config = {"device": self.device, "shapes": self.opts.shapes, "rounds": self.opts.rounds,
                      "driver": "mcp"}
            self.run_id, self.arch, self.best = start_run(self.task, store, versions, AGENT_NAME, self.device,
                                                          config, self._evaluator(), self.scratch)
            profile_best(self.task, store, self.best, None, self.device, self.opts.sandbox, self.view)
            self.view.start(self.task, AGENT_NAME, self.device, self.best)
        return self.best

    def _stop(self, store, status: str, why: str) -> None:
        if not self.measured:
            why += UNMEASURED
        self.status, self.why = status, why
        summary = self.view.summary(self.task, store, self.run_id, self.best, status, why, time.monotonic() - self.t0)
        store.finish_run(self.run_id, status, json.dumps(summary, default=str))

    def close(self) -> None:
        """The client went away: an unfinished run is closed as stopped, so that
        `kernelloop run --resume` never picks it up with another agent."""
        try:
            if self.run_id is not None and self.status is None:
                with self._memory() as (store, _):
                    self._stop(store, "stopped", f"the external agent disconnected after {self.round} round(s)")
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)

    # ---- operations --------------------------------------------------------------------
    def submit(self, source: str, claim: str, prediction: str, direction: str = "",
               progress: Callable[[str], None] | None = None) -> dict:
        """One round with one proposal; the verdict with its reasons and numbers."""
        if not claim.strip():
            raise KernelloopError("submit_candidate needs a claim: say what you changed and why it should be faster.")
        with self._memory(progress) as (store, versions):
            if self.status is not None:
                raise KernelloopError(f"this run has ended ({self.status}: {self.why}); restart the "
                                      "`kernelloop mcp` server to start a new run.")
            best = self._ensure_run(store, versions)
            r = self.round + 1
            stop = budget_check(r - 1, 0.0, time.monotonic() - self.t0, self.task.spec.rules)
            if stop is None and r > self.last_round:
                stop = budget_check(self.task.spec.rules.max_rounds, 0.0, 0.0, self.task.spec.rules)
            if stop is not None:
                self._stop(store, stop.status, stop.reason)
                raise KernelloopError(f"the run's budget is spent ({stop.reason}); nothing was evaluated.")
            store.start_round(self.run_id, r)
            prop = Proposal(source=source, hypothesis=claim, predicted_effect=prediction, direction=direction,
                            agent=AGENT_NAME)
            won = one_proposal(self.task, store, versions, self.agent, self.view, self.run_id, r, 1, prop, best,
                               self._evaluator(), self.arch)
            self.best = adopt(self.task, store, best, won, self.device, self.opts.sandbox, self.view)
            store.finish_round(self.run_id, r)
            self.round = r
            self.view.round_done(r, self.best, won.gain or 0.0)
            if self.measured:
                self.gains.append(won.gain or 0.0)
                if stop := (stall_check(self.gains, self.task.spec.rules, self.best.pct_of_floor)
                            or bound_check(self.best.pct_of_floor, self.task.spec.rules)):
                    self._stop(store, stop.status, stop.reason)
            if self.status is None and r >= self.last_round:
                self._stop(store, "finished", "all rounds done")
            attempt = store.attempt(won.pid)
            pending = won.best is not None and getattr(store.pending_best(self.task.name), "id", None) == won.pid
        return {
            "verdict": _verdict_word(attempt, won.best is not None, self.measured),
            "outcome": self.agent.last_outcome,
            **attempt_dict(attempt),
            "new_best": won.best is not None,
            "pending_approval": pending,
            "best": self._best_dict(),
            "run": self._run_dict(),
        }

    def describe(self) -> dict:
        """The task as an agent needs it to write a candidate, and where the run stands."""
        t, rules = self.task, self.task.spec.rules
        shapes = select_shapes(t, self.device, self.opts.shapes)
        return {
            "task": t.name, "description": t.spec.task.description, "language": t.spec.task.language,
            "entry": t.spec.task.entry, "entry_signature": _signature(t.baseline_path.read_text(), t.spec.task.entry),
            "params": dict(t.spec.params),
            "device": self.device, "timings_count": self.measured,
            "shapes": [{"shape": s.label, "weight": s.weight, "tag": s.tag} for s in shapes],
            "dtypes": self.opts.dtypes or list(t.spec.dtypes),
            "tolerances": {k: v.model_dump() for k, v in t.spec.tolerances.items()},
            "tunables": list(t.spec.task.tunables),
            "rules": rules_text(rules, t.spec.task.entry),
            "baseline_source": t.baseline_path.read_text(),
            "best": self._best_dict(source=True),
            "run": self._run_dict(),
        }

    def history(self, limit: int = 20) -> dict:
        """The digest the loop's agents get each round, and the latest history rows."""
        with self._memory(write=False) as (store, _):
            attempts = store.attempts(self.task.name)
            return {"digest": store.digest(self.task.name),
                    "attempts": [attempt_dict(a) for a in attempts[-limit:]]}

    def profile(self, source: str | None, progress: Callable[[str], None] | None = None) -> dict:
        """The profile summary of the best (source None) or of a candidate, with deltas
        against the best."""
        from kernelloop.profile.run import profile_candidate

        with self._memory(progress) as (store, versions):
            best = self._ensure_run(store, versions)
            if source is None:
                return {"of": f"best #{best.pid}", "summary": best.profile_text or context_profile(best.record)}
            path = self.scratch / f"profile_{int(time.time() * 1000)}.py"
            path.write_text(source)
            with self.profiles.spend():
                out = profile_candidate(self.task, path, parent=best.path, device=self.device,
                                        sandbox=self.opts.sandbox, progress=self.view.status)
            return {"of": "candidate", "parent": f"best #{best.pid}", "shape": out.shape, "dtype": out.dtype,
                    "summary": out.report.format_for_prompt(), "metrics": out.report.agent_metrics()}

    def variant(self, ref: str) -> dict:
        """The source of any recorded generation: a proposal id, 'best', or a git revision."""
        with self._memory(write=False) as (store, versions):
            attempt = None
            if ref.isdigit():
                attempt = store.attempt(int(ref))
                if not attempt.commit_sha:
                    raise KernelloopError(f"proposal #{ref} was never committed (refused or in flight); "
                                          "pick an id with a commit from the history tool.")
                commit = versions.resolve(attempt.commit_sha)
            else:
                commit = versions.resolve(ref)
            out = {"ref": ref, "commit": commit, "source": versions.read(commit).decode()}
            if attempt is not None:
                out["attempt"] = attempt_dict(attempt)
            return out

    # ---- views -----------------------------------------------------------------------
    def _best_dict(self, source: bool = False) -> dict:
        b = self.best
        if b is None:
            return {"id": None, "what": "the baseline (the run starts, and the baseline is evaluated as round 0, "
                                        "on the first submit_candidate or profile call)"}
        out = {"id": b.pid, "objective_vs_baseline": b.objective, "pct_of_floor": b.pct_of_floor,
               "per_shape": b.shapes}
        if source:
            out["source"] = b.source
        return out

    def _run_dict(self) -> dict:
        return {"run_id": self.run_id, "rounds_used": self.round, "rounds_left": max(0, self.last_round - self.round),
                "profiles_left": self.profiles.left,
                "status": self.status or ("running" if self.run_id else "not started"), "reason": self.why}


def _verdict_word(a: Attempt, promoted: bool, measured: bool) -> str:
    if a.status == "refused":
        return "refused"
    if promoted:
        return "accepted"
    if a.category == "accepted" and not measured:
        return "correct, unmeasured"
    return "rejected"


def _signature(source: str, entry: str) -> str:
    import ast

    from kernelloop.policy.static import find_function

    fn = find_function(ast.parse(source), entry)
    return f"def {entry}({ast.unparse(fn.args)})" if fn is not None else ""
