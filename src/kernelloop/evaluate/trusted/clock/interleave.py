"""The interleaved benchmark: one sandboxed worker per implementation, one at a time.

Layout (docs/benchmarking.md has the why):
1. every worker starts at once (each pays its own Python + torch import, concurrently);
   none has imported its implementation yet;
2. on a GPU, each non-candidate worker calibrates its idle probe, one at a time — no
   candidate code has run anywhere yet;
3. every worker imports its implementation; from then on, a worker runs only during its
   own turn and is stopped (its whole process tree) otherwise;
4. per shape, with inputs and a stochastic seed drawn fresh from `secrets`: all workers
   build the inputs, make one untimed call and warm up; on a GPU each then measures a
   rough time alone, and the trusted side chooses one method for every slot (per-call
   events, CUDA-graph replay for short kernels, device-wide where work escapes the
   calling stream); then rounds until the shape's budget: in a shuffled order (secret
   RNG) each worker times one batch of the same number of calls, every call on inputs of
   its own from a secret seed sent with the batch, committing to each output inside the
   batch; after some of the candidate's batches (chosen at random once the batch is
   back) the trusted side audits one of its calls: the output must match its commitment
   and the float64 reference for that call's inputs; on a GPU, then run-through rounds
   (trusted/clock/through.py): units back to back with nothing reported but commitments, the
   trusted clock's check on every worker's events; then calibration top-ups and the
   second timer;
5. every worker reports its tripwires (patched harness, stray processes, calls that
   launched nothing) and exits; anything left is killed.
A problem stops the run: the record carries it and the gate rejects.

Evidence slots (`Evidence`: the task's reference under torch.compile, bench.py's
`compiled=True`) are timed in the same rounds, on the same GPU and inputs, but decide
nothing: the method, the batch size, the rounds' budget, the trusted clock's checks and
the run-through rounds are the others' alone, and anything that goes wrong with an
evidence slot (a failed or too long compile, a crash, a failed audit, foreign work in its
turn) drops it with a warning instead of stopping the run.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

from kernelloop.evaluate.trusted.clock.interleave_audit import AuditMixin
from kernelloop.evaluate.trusted.clock.interleave_checks import ShapeChecksMixin
from kernelloop.evaluate.trusted.clock.interleave_rounds import RoundsMixin
from kernelloop.evaluate.trusted.clock.interleave_start import LifecycleMixin
from kernelloop.evaluate.trusted.clock.interleave_types import (
    EVIDENCE_RESERVE,
    Evidence,
    Outcome,
    Problem,
    Settings,
    SlotResult,
    _Abort,
)
from kernelloop.evaluate.trusted.launch.prestart import scratch_root
from kernelloop.evaluate.trusted.launch.workers import TimingWorker, WorkerFailed
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.task import Shape, Task

# The benchmark's parts live in interleave_types/_rounds/_audit; these are its interface.
__all__ = ["Evidence", "Outcome", "Problem", "Session", "Settings", "SlotResult", "run_timing"]

T = TypeVar("T")


class Session(RoundsMixin, ShapeChecksMixin, AuditMixin, LifecycleMixin):
    def __init__(
        self,
        task: Task,
        slots: dict[str, Path],
        shapes: list[Shape],
        dtype: str,
        device: str,
        settings: Settings,
        sandbox: str,
        timeout_s: float,
        say: Callable[[str], None],
        candidate: str,
        reference: str,
        gpu: int | None = None,
        evidence: dict[str, Evidence] | None = None,
        head_s: float = 0.0,
    ) -> None:
        self.gpu = gpu  # nvidia-smi's index of the GPU every worker is bound to (None: 0)
        self.task, self.slot_files, self.shapes, self.dtype, self.device = (
            task,
            slots,
            shapes,
            dtype,
            device,
        )
        self.s, self.say, self.candidate, self.reference = settings, say, candidate, reference
        self.deadline = time.monotonic() + timeout_s  # set again when `run` begins
        self.timeout_s = timeout_s
        # Workers spawned `head_s` at most before `run` (`spawn`): their sandbox's own
        # wall-clock limit is that much longer, the benchmark's is still `timeout_s`.
        self.head_s = head_s
        self.root: Path | None = None
        self.spawned_at = 0.0
        self.sandbox = sandbox
        self.cuda = device == "cuda"
        self.interp = device == "cpu" and task.spec.task.language == "triton"
        self.out = Outcome()
        self.workers: dict[str, TimingWorker] = {}
        self.cal: dict[str, dict[str, float]] = {}
        self.judge: Judge | None = None
        self.like: torch.Tensor | None = None  # the current shape's output, as shape and dtype only
        self._audits: dict[tuple[str, str], int] = {}  # (shape, slot) -> audits so far
        self.evidence = {s: e for s, e in (evidence or {}).items() if s in slots}
        self._gone: dict[str, TimingWorker] = {}  # dropped evidence slots' workers
        self._prepare_spent = 0.0  # evidence slots' `prepare` time so far (the compile budget)
        # (shape label, its `prepare` arguments) for the second timer after every shape
        self._profile_after: list[tuple[str, dict]] = []

    # ---- helpers ------------------------------------------------------------------
    @contextlib.contextmanager
    def phase(self, name: str):
        """Add the wall time of the block to `Outcome.phases_s[name]`."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            ph = self.out.phases_s
            ph[name] = round(ph.get(name, 0.0) + time.monotonic() - t0, 4)

    def left(self, cap: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WorkerFailed(
                self.candidate, "timeout", f"the benchmark exceeded its {self.timeout_s:g} s limit"
            )
        return min(cap, left)

    def problem(self, category: str, slot: str, text: str) -> None:
        """A problem stops the run; one of an evidence slot's drops that slot instead."""
        if slot in self.evidence:
            self.drop(slot, text)
            return
        self.out.problems.append(Problem(category, slot, text))

    def core(self) -> list[str]:
        """The slots the gate reads (every slot but the evidence slots), in start order."""
        return [s for s in self.workers if s not in self.evidence]

    def drop(self, slot: str, why: str) -> None:
        """Stop timing evidence slot `slot` (its worker is killed): shapes it finished keep
        their numbers, the rest of the run goes on without it."""
        w = self.workers.pop(slot, None)
        if w is None:
            return
        self._gone[slot] = w
        if not w.dead:
            w.kill()
        self.out.dropped[slot] = why
        self.out.warnings.append(f"{slot} slot dropped (evidence only, never the gate's): {why}")

    def turn(self, slot: str, cmd: str, cap: float = 120.0, **args):
        """One command to one worker, alone: resumed for it, stopped again after. An
        evidence slot that fails (or would cut into the time the others need) is dropped
        and the answer is None."""
        w = self.workers[slot]
        if slot in self.evidence:
            if self.deadline - time.monotonic() < EVIDENCE_RESERVE * self.timeout_s:
                self.drop(slot, f"the benchmark's {self.timeout_s:g} s limit was near")
                return None
            try:
                return self._turn(w, cmd, cap, args)
            except WorkerFailed as e:
                self.drop(slot, f"{cmd}: {e}")
                return None
        return self._turn(w, cmd, cap, args)

    def _turn(self, w: TimingWorker, cmd: str, cap: float, args: dict):
        t0 = time.monotonic()
        ans, ans.waited_s = self.held(w, lambda: w.ask(cmd, self.left(cap), **args))
        ph = self.out.phases_s  # every turn: how many and their time (the count is a float)
        ph["turns"] = ph.get("turns", 0) + 1
        ph["turn_s"] = round(ph.get("turn_s", 0.0) + time.monotonic() - t0, 4)
        return ans

    def held(self, w: TimingWorker, act: Callable[[], T]) -> tuple[T, float]:
        """`act()` with worker `w` resumed alone (stopped again after, unless it died), and
        the seconds its threads were runnable but waited for a CPU meanwhile."""
        before = w.freezer.waited_ns()
        w.resume()
        try:
            out = act()
        finally:
            if not w.dead:
                w.pause()
        return out, max(0, w.freezer.waited_ns() - before) / 1e9

    def all_at_once(
        self,
        cmd: str,
        cap: float,
        per_slot: Callable[[str], dict] | None = None,
        caps: dict[str, float] | None = None,
        doing: str = "",
    ) -> dict:
        """The same command to every worker concurrently (untimed work: imports, warm-up).
        `caps`: a slot's own time limit (from when its command was sent); an evidence slot
        that fails or runs past it is dropped (`doing` says what it was doing)."""
        for w in self.workers.values():
            w.resume()
        answers, sent = {}, {}
        try:
            for slot, w in list(self.workers.items()):
                try:
                    sent[slot] = w.send(cmd, **(per_slot(slot) if per_slot else {}))
                except WorkerFailed as e:
                    if slot not in self.evidence:
                        raise
                    self.drop(slot, f"{doing or cmd}: {e}")
            for slot, w in list(self.workers.items()):
                own = (caps or {}).get(slot, cap)
                try:
                    answers[slot] = w.collect(
                        cmd, sent[slot], self.left(own - (time.monotonic() - sent[slot]))
                    )
                except WorkerFailed as e:
                    if slot not in self.evidence:
                        raise
                    self.drop(slot, f"{doing or cmd}: {e}")
        finally:
            for w in self.workers.values():
                if not w.dead:
                    w.pause()
        return answers

    # ---- the run ------------------------------------------------------------------
    def spawn(self) -> None:
        """Start every worker's process (each imports Python and torch, then waits for its
        first command) without waiting for any: the loop does this while the candidate's
        correctness runs (`bench.start_benchmark`), so the imports are done when `run`
        begins. No implementation is imported before `run`'s `load`; a spawned session that
        is never run is ended with `cancel`."""
        if self.root is not None:
            return
        self.root = Path(tempfile.mkdtemp(dir=scratch_root()))  # no "kernelloop" in its paths
        self.spawned_at = time.monotonic()
        try:
            self._spawn(self.root)
        except BaseException:
            self.cancel()
            raise

    def cancel(self) -> None:
        """End a spawned session that will not run (its candidate was rejected): every
        worker killed and reaped, its folder removed. Idempotent."""
        for w in [*self.workers.values(), *self._gone.values()]:
            if not w.dead and w.result is None:
                w.kill()
            w.finish()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def reset(self) -> None:
        """`cancel`, and back to not spawned: `run` starts fresh workers."""
        self.cancel()
        self.workers, self._gone, self.root = {}, {}, None
        self.out = Outcome()

    def run(self) -> Outcome:
        self.deadline = time.monotonic() + self.timeout_s
        if self.root is not None and time.monotonic() - self.spawned_at > self.head_s:
            # Spawned longer ago than its head start: its workers' own limit could end
            # them inside this run. Start afresh (nothing was imported yet).
            self.reset()
        try:
            with self.phase("start"):
                self.spawn()
                self._hellos()
            self._prologue()
            t_phase = time.monotonic()
            for k, shape in enumerate(self.shapes):
                self._shape(k, shape)
            with self.phase("profile"):
                self._second_timer()
            self.out.timing_phase_s = round(time.monotonic() - t_phase, 3)
            with self.phase("stop"):
                self._stop()
        except WorkerFailed as e:
            self.problem(e.category, e.slot, str(e))
        except _Abort:
            pass
        finally:
            self._finish_all()
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)
        return self.out


def run_timing(
    task: Task,
    slots: dict[str, Path],
    shapes: list[Shape],
    dtype: str,
    device: str,
    *,
    settings: Settings,
    sandbox: str = "auto",
    timeout_s: float = 600.0,
    say: Callable[[str], None] | None = None,
    candidate: str = "candidate",
    reference: str = "baseline",
    gpu: int | None = None,
    evidence: dict[str, Evidence] | None = None,
) -> Outcome:
    """Time `slots` ({slot name: implementation file}) interleaved, one worker each, all
    on GPU `gpu` (nvidia-smi's index; None: GPU 0), so no speed is compared across GPUs.
    `evidence`: slots of `slots` timed for the record only (see `Evidence`)."""
    session = Session(
        task,
        slots,
        shapes,
        dtype,
        device,
        settings,
        sandbox,
        timeout_s,
        say or (lambda _m: None),
        candidate,
        reference,
        gpu,
        evidence,
    )
    return session.run()
