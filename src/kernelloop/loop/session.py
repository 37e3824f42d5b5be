"""The run an external coding agent (Claude Code, Codex, …) drives through `kernelloop mcp`.

Each `submit` is one round of the loop with one proposal, through the same round function
as `kernelloop run` (`loop/round.py`): the static screen (run first, before round 0:
loop/screening.py), policy pre-checks and duplicate refusal, a git-versioned variant, the
sandboxed evaluation, the benchmark and gate where timings count, the history record and
the best's promotion rules. The round budget, the time cap and the stall rule apply as
they do in the loop. Candidate source is only ever written to a file for the sandboxed
worker: this process never imports it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from kernelloop.agents.base import Proposal
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.launch import prestart
from kernelloop.evaluate.trusted.run import resolve_device, timings_count
from kernelloop.history import open_task_memory
from kernelloop.history.heartbeat import Heartbeat
from kernelloop.history.models import REFUSED, Attempt, history_row, outcome_word
from kernelloop.loop.context import context_profile
from kernelloop.loop.external import AGENT_NAME, ExternalAgent, ProgressView
from kernelloop.loop.resume import refuse_if_live
from kernelloop.loop.round import UNMEASURED, play_round, start_run
from kernelloop.loop.screening import screen_refusals, unparsable
from kernelloop.loop.session_views import SessionViews
from kernelloop.loop.state import Best, Options, Run
from kernelloop.loop.summary import run_summary
from kernelloop.policy import budget_check
from kernelloop.profile.budget import ProfileBudget
from kernelloop.profile.render import prompt_text
from kernelloop.task import Task
from kernelloop.task.native_source import python_source


class ExternalSession(SessionViews):
    """One run of one task, driven call by call. Operations are serialized (one evaluation
    at a time); each opens the history in its own thread, as SQLite connections are
    per-thread."""

    def __init__(self, task: Task, opts: Options) -> None:
        self.task, self.opts = task, opts
        self.device = resolve_device(opts.device)
        # As in the loop: speed counts on a GPU and for plain-PyTorch tasks, never in
        # Triton's interpreter.
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
        # This process's stretch of the run begins here, as the summary's wall time does:
        # the heartbeat's claim says so, so a kill -9 then `--resume` counts the baseline's
        # evaluation in the stretch it ended (history `interruptions.ran_s`).
        self.t0 = time.monotonic()
        self.started = datetime.now(UTC).isoformat(timespec="milliseconds")
        self._lock = threading.Lock()
        self.profiles = ProfileBudget.for_run(rules, self.last_round)  # profile/budget.py
        self._heartbeat: Heartbeat | None = None
        self._retry_used = False  # the free retry of an unparsable source, once in a row
        # Rounds refused before round 0 (the screen, a second unparsable source): spent at
        # once, recorded in the history with the run when the baseline is (`_ensure_run`).
        self._early: list[tuple[int, Proposal, list[str]]] = []

    # ---- plumbing ------------------------------------------------------------------
    @contextmanager
    def _memory(
        self, progress: Callable[[str], None] | None = None, *, write: bool = True
    ) -> Iterator[Run]:
        """The run with this thread's history and versions for one operation; writers take
        turns, readers (history, variant) do not wait for an evaluation in progress."""
        with self._lock if write else contextlib.nullcontext():
            if write:
                self.view.on_status = progress
            store, versions = open_task_memory(self.task, self.opts.workspace)
            run = Run(
                self.task,
                store,
                versions,
                self.agent,
                self.view,
                self.scratch,
                self.device,
                self.measured,
                self.opts.sandbox,
                self.opts.shapes,
            )
            run.dtypes = self.opts.dtypes
            run.allow_unsandboxed = self.opts.allow_unsandboxed
            run.id, run.arch, run.gains = self.run_id or 0, self.arch, self.gains
            try:
                yield run
            finally:
                store.close()
                if write:
                    self.view.on_status = None

    def _ensure_run(self, run: Run) -> Best:
        """Round 0 on first need: the baseline evaluated, versioned, recorded and profiled,
        and the run held by this process (pid and heartbeat in its row)."""
        if self.best is None:
            refuse_if_live(self.task, run.store)
            config = {
                "device": self.device,
                "shapes": self.opts.shapes,
                "rounds": self.opts.rounds,
                "driver": "mcp",
            }
            self.best = start_run(run, config)
            self.run_id, self.arch = run.id, run.arch
            self._heartbeat = Heartbeat(run.store.path, run.id, since=self.started).start()
            self.view.start(self.task, AGENT_NAME, self.device, self.best)
            self._record_early(run)
        return self.best

    def _refuse_early(self, prop: Proposal, reasons: list[str]) -> dict | None:
        """A submission refused before round 0, answered without evaluating the baseline:
        its round is spent now and recorded with the run (`_record_early`). None when no
        round is left to spend that way (the budget's refusal then needs the run)."""
        with self._lock:  # operations take turns; round 0 may have started meanwhile
            r = self.round + 1
            elapsed = time.monotonic() - self.t0
            rules = self.task.spec.rules
            if (
                self.best is not None
                or r > self.last_round
                or budget_check(r - 1, 0, elapsed, rules)
            ):
                return None
            self._early.append((r, prop, reasons))
            self.round = r
        why = "; ".join(reasons)
        return {
            "round": r,
            "status": "refused",
            "refused_reason": why,
            "commit": None,
            "verdict": REFUSED,
            "outcome": f"refused before evaluation: {why}",
            "round_spent": True,
            "new_best": False,
            "pending_approval": False,
            "best": self._best_dict(),
            "run": self._run_dict(),
        }

    def _record_early(self, run: Run) -> None:
        """The rounds refused before round 0, recorded as the loop records a round whose
        only proposal was refused (so the stall rule counts them as it would there)."""
        early, self._early = self._early, []
        for r, prop, reasons in early:
            assert self.best is not None
            played = play_round(run, r, [prop], self.best, [reasons])
            self.best = played.best
            if played.stop:
                self._stop(run, played.stop.status, played.stop.reason)
                return

    def _stop(self, run: Run, status: str, why: str) -> None:
        if not self.measured:
            why += UNMEASURED
        self.status, self.why = status, why
        wall_s = time.monotonic() - self.t0
        summary = run_summary(self.task, run.store, run.id, self.best, status, why, wall_s)
        self.view.finish(summary)
        run.store.finish_run(run.id, status, json.dumps(summary, default=str))
        if self._heartbeat is not None:
            self._heartbeat.stop()

    def close(self) -> None:
        """The client went away: an unfinished run is closed as stopped, so that
        `kernelloop run --resume` never picks it up with another agent."""
        try:
            if self.run_id is not None and self.status is None:
                with self._memory() as run:
                    why = f"the external agent disconnected after {self.round} round(s)"
                    self._stop(run, "stopped", why)
        finally:
            if self._heartbeat is not None:
                self._heartbeat.stop()
            prestart.stop_all()  # the next evaluation's workers, started for none
            shutil.rmtree(self.scratch, ignore_errors=True)

    # ---- operations --------------------------------------------------------------------
    def submit(
        self,
        source: str,
        claim: str,
        prediction: str,
        direction: str = "",
        progress: Callable[[str], None] | None = None,
        parent: int | None = None,
    ) -> dict:
        """One round with one proposal; the verdict with its reasons and numbers. `parent`:
        a correct earlier candidate's id to count the edit against (default: the best)."""
        if not claim.strip():
            raise KernelloopError(
                "submit_candidate needs a claim: say what you changed and why it should be faster."
            )
        # Parse first, before the baseline or anything else is evaluated: a source that does
        # not parse (or lacks the entry) gets one free retry, as the loop's own agents do
        # after an unusable answer; a second one in a row is spent as a round.
        problem = unparsable(self.task, source)
        if problem and not self._retry_used:
            self._retry_used = True
            return {
                "verdict": "unparsable",
                "round_spent": False,
                "outcome": f"not evaluated, no round spent: {problem}. Fix it and submit "
                "again; a second unparsable source in a row is judged (and costs a round).",
                "new_best": False,
                "pending_approval": False,
                "best": self._best_dict(),
                "run": self._run_dict(),
            }
        self._retry_used = False
        prop = Proposal(
            source=python_source(self.task, source),  # a cuda task's C++ source: its module
            hypothesis=claim,
            predicted_effect=prediction,
            direction=direction,
            agent=AGENT_NAME,
            parent=str(parent) if parent is not None else "",
        )
        # Screened next, before round 0 or any sandbox: what the evaluation's first stage
        # would refuse in milliseconds is refused now, and spends its round, as a policy
        # refusal in the loop does (docs/mcp.md).
        screened = [] if problem else screen_refusals(self.task, prop.source)
        if self.best is None and (problem or screened):
            if early := self._refuse_early(prop, [problem] if problem else screened):
                return early
        with self._memory(progress) as run:
            self._check_budget(run)
            r = self.round + 1
            played = play_round(run, r, [prop], self.best, [screened])
            self.best, self.round, [won] = played.best, r, played.outcomes
            if played.stop:
                self._stop(run, played.stop.status, played.stop.reason)
            if self.status is None and r >= self.last_round:
                self._stop(run, "finished", "all rounds done")
            attempt = run.store.attempt(won.pid)
            pending_best = run.store.pending_best(self.task.name)
            pending = won.best is not None and getattr(pending_best, "id", None) == won.pid
        return {
            **history_row(attempt),
            "verdict": _verdict_word(attempt, won.best is not None, self.measured),
            "outcome": self.agent.last_outcome,
            "round_spent": True,
            "new_best": won.best is not None,
            "pending_approval": pending,
            "best": self._best_dict(),
            "run": self._run_dict(),
        }

    def _check_budget(self, run: Run) -> None:
        """Before a submission: the run has not ended, round 0 is done, and a round is left."""
        if self.status is not None:
            raise KernelloopError(
                f"this run has ended ({self.status}: {self.why}); restart the "
                "`kernelloop mcp` server to start a new run."
            )
        self._ensure_run(run)
        if self.status is not None:  # a stop rule ended it over the early refused rounds
            raise KernelloopError(
                f"this run has ended ({self.status}: {self.why}); restart the "
                "`kernelloop mcp` server to start a new run."
            )
        rules, r = self.task.spec.rules, self.round + 1
        stop = budget_check(r - 1, 0.0, time.monotonic() - self.t0, rules)
        if stop is None and r > self.last_round:
            stop = budget_check(rules.max_rounds, 0.0, 0.0, rules)
        if stop is not None:
            self._stop(run, stop.status, stop.reason)
            raise KernelloopError(
                f"the run's budget is spent ({stop.reason}); nothing was evaluated."
            )

    def profile(self, source: str | None, progress: Callable[[str], None] | None = None) -> dict:
        """The profile summary of the best (source None) or of a candidate, with deltas
        against the best."""
        from kernelloop.profile.run import profile_candidate

        with self._memory(progress) as run:
            best = self._ensure_run(run)
            if source is None:
                summary = best.profile_text or context_profile(best.record)
                return {"of": f"best #{best.pid}", "summary": summary}
            path = self.scratch / f"profile_{int(time.time() * 1000)}.py"
            path.write_text(python_source(self.task, source))
            with self.profiles.spend():
                out = profile_candidate(
                    self.task,
                    path,
                    parent=best.path,
                    device=self.device,
                    sandbox=self.opts.sandbox,
                    progress=self.view.status,
                )
            return {
                "of": "candidate",
                "parent": f"best #{best.pid}",
                "shape": out.shape,
                "dtype": out.dtype,
                "summary": prompt_text(out.report),
                "metrics": out.report.agent_metrics(),
            }


def _verdict_word(a: Attempt, promoted: bool, measured: bool) -> str:
    """The outcome in the shared vocabulary (history/models.outcome_word)."""
    del measured  # the attempt's own objective says whether it was timed
    return outcome_word(a.status, a.accepted, a.category, a.objective is not None, promoted)
