"""A candidate's evaluation as a round needs it — an executor job (`EvaluationJob`), so
the round can judge several candidates in turn now and in parallel where an executor
has several GPUs — and the rule that tells an infrastructure failure from the
candidate's fault.

Correctness runs in the sandbox; where timings count the candidate is then benchmarked
against the best and gated. The source is written to a file for the sandboxed worker:
this process never imports it.

Infrastructure, not the candidate (retried once, then recorded as `infrastructure`):
- the sandbox could not start (`SandboxError`): no candidate code ran;
- the correctness worker's verdict is `crash` because it was killed by SIGKILL (exit
  status -9, or 137 where bubblewrap reports its child's death): what the OOM killer, an
  operator or a dying GPU context in another process does;
- the benchmark produced no usable record because its worker was killed the same way;
- the benchmark was refused because the machine was too busy to time on (the workers
  waited for a CPU in most batches: timing_checks.busy_problem), and nothing else was
  found against the candidate. A candidate that crowds only its own worker is told so,
  in other words, and rejected;
- the executor lost the job (`executor.JobLost`): the Ray actor running it died, or its
  node, on the first attempt and again on a fresh actor (executor/cluster.py). One
  death costs nothing: the second attempt's record carries a warning saying why it ran.
A candidate can kill itself with SIGKILL (or exit with 137) and so look like the second
case. The rule is safe against that: the retry is a whole fresh evaluation (new inputs,
new sandbox) that must pass on its own, and a second infrastructure failure records a row
with no evaluation, which never promotes. At worst such a candidate gets one retry and an
`infrastructure` row, and costs its round. The same holds for an actor's death: the
candidate runs in the sandbox, not in the actor, but even one that could bring its actor
down (say, by output that crashes the trusted side) only earns the same row. What the
rule does not catch (a GPU fault that surfaces as a CUDA error inside the worker) stays
the candidate's fault: it reads exactly like an illegal memory access of its own.
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernelloop.errors import SandboxError
from kernelloop.evaluate.trusted.bench import PendingBenchmark, start_benchmark
from kernelloop.evaluate.trusted.clock.timing_checks import BUSY
from kernelloop.evaluate.trusted.launch import prestart
from kernelloop.evaluate.trusted.run import default_workers, evaluate
from kernelloop.evaluate.trusted.values.refcache import References
from kernelloop.executor import JobLost, Slot
from kernelloop.executor.turns import of_device
from kernelloop.gate import decide
from kernelloop.loop.state import Best, Evaluated, Run
from kernelloop.objective import shape_table
from kernelloop.task import Task, files, load_task

# How long the next evaluation's correctness workers wait for their candidate before they
# are replaced (an agent's turn between candidates; prestart.py).
PRESTART_HEAD_S = 600.0

# "the worker died with exit code -9 (killed by SIGKILL)" (evaluate), "the benchmark
# worker died with exit code 137" (bench, under bubblewrap).
_KILLED = re.compile(r"worker died with exit code (-9|137)\b")


def infrastructure_fault(ev: Evaluated) -> str:
    """Why `ev` has no verdict through no act of the candidate, or "" when it stands."""
    rec = ev.record
    if rec is not None and rec.verdict.category == "internal":
        return rec.verdict.reasons[0] if rec.verdict.reasons else "the trusted side failed"
    if rec is not None and rec.verdict.category == "crash":
        if killed := next((r for r in rec.verdict.reasons if _KILLED.search(r)), None):
            return f"the sandboxed worker was killed from outside ({killed})"
    if ev.bench is not None and ev.bench.infrastructure:  # an OOM of a trusted slot, no room
        return ev.bench.infrastructure[0]
    if ev.bench is not None and ev.gate is not None and ev.gate.category == "timing":
        if killed := next((p for p in ev.bench.problems if _KILLED.search(p)), None):
            return f"the benchmark's worker was killed from outside ({killed})"
        busy = [p for p in ev.bench.problems if BUSY in p]
        if busy and len(busy) == len(ev.bench.problems):  # nothing else found against it
            return f"the benchmark could not be trusted on a busy machine ({busy[0]})"
    return ""


@dataclass(frozen=True)
class EvaluationJob:
    """One candidate's evaluation as an executor job (`executor.Job`): everything it needs
    travels with it, and it writes nothing but its scratch file's neighbours. Run on a
    slot, it returns the `Evaluated` record, with one retry after an infrastructure
    failure."""

    name: str
    task: Task
    path: Path  # the candidate's source, written by the round
    best: Path | None  # the best to time it against (None: round 0, the baseline itself)
    device: str
    measured: bool
    sandbox: str = "auto"
    shapes: str | None = None
    dtypes: tuple[str, ...] | None = None
    progress: Callable[[str], None] = field(default=lambda _m: None, compare=False)
    # The round's seeds and reference cache, shared by its candidates (refcache.py).
    references: References | None = field(default=None, compare=False)
    # Why this is a second attempt: the executor lost the first (its Ray actor died).
    retried_after: str = ""
    compiled: bool = False  # also time the reference under torch.compile (evidence only)
    # Start the benchmark's workers while correctness runs (None: on a GPU; see _overlap).
    overlap: bool | None = None

    def __call__(self, slot: Slot) -> Evaluated:
        ev = self._judged(slot)
        if self.retried_after and ev.record is not None:
            ev.record.warnings.append(
                f"evaluated a second time: the first attempt was lost through no fault of "
                f"the candidate ({self.retried_after})"
            )
        return ev

    def _judged(self, slot: Slot) -> Evaluated:
        first = self._once(slot, self.references)
        if not first.infrastructure:
            return first
        self.progress(f"{self.name}: {first.infrastructure}; evaluating it once more")
        second = self._once(slot, None)  # a whole fresh evaluation: new seeds, new inputs
        if second.infrastructure:
            second.infrastructure = f"twice: {first.infrastructure}; then {second.infrastructure}"
        elif second.record is not None:
            second.record.warnings.append(
                f"evaluated a second time: the first attempt failed through no fault of the "
                f"candidate ({first.infrastructure})"
            )
        return second

    def _once(self, slot: Slot, references: References | None) -> Evaluated:
        """Correctness, then (where timings count) the benchmark against the best and the
        baseline, both on the slot's GPU. On a device that several slots share (the CPU
        with --jobs), the check takes a shared turn and the timing the device alone."""
        task, say, name = self.task, self.progress, self.name
        dtypes = list(self.dtypes) if self.dtypes else None
        turns = of_device(slot.device_key)
        pending: PendingBenchmark | None = None
        overlap = self._overlap()
        warmed: list[bool] = []

        def warm_next() -> None:
            # The next evaluation's correctness workers (prestart.py), on this thread.
            if overlap and not warmed:
                warmed.append(self._warm_next(slot))

        def smoke_passed() -> None:
            if pending is not None:
                pending.spawn()
            warm_next()

        try:
            if self.measured and overlap:
                # The benchmark's workers start (import Python and torch, then wait) once
                # the smoke stage has passed, beside full correctness: a candidate that
                # fails early pays nothing for them. None imports an implementation before
                # correctness passed, and a rejected candidate's are killed unused.
                pending = self._benchmark(slot, dtypes, head_start=True)
            say(f"checking {name}" + (f" on {slot.label}" if slot.gpu is not None else ""))
            with turns.shared():
                record = evaluate(
                    task,
                    self.path,
                    device=self.device,
                    shapes=self.shapes,
                    dtypes=dtypes,
                    sandbox=self.sandbox,
                    progress=say,
                    timing=False,
                    gpu=slot.gpu,
                    references=references,
                    on_passed={"smoke": smoke_passed} if overlap else None,
                    prestarted=overlap,
                )
            ev = Evaluated(record, slot=slot.label)
            if record.verdict.accepted and self.measured:
                say(f"benchmarking {name}")
                with turns.exclusive():
                    timed = pending or self._benchmark(slot, dtypes, head_start=False)
                    bench = timed.run()
                gate = decide(record, bench, task.spec.rules)
                if gate.accepted and timed.turn_waiting:
                    # only a best's speedup over torch.compile is shown: a compiled slot
                    # with no room beside the gate's slots is timed in turn for it alone
                    with turns.exclusive():
                        timed.finish_compiled(bench)
                    gate = decide(record, bench, task.spec.rules)
                ev = Evaluated(record, bench, gate, shape_table(bench, gate), slot=slot.label)
        except SandboxError as e:
            return Evaluated(None, infrastructure=f"the sandbox could not start ({e})")
        finally:
            if pending is not None:
                pending.cancel()  # a no-op once it ran
            warm_next()  # rejected before smoke passed: the next one's workers start now
        ev.infrastructure = infrastructure_fault(ev)
        return ev

    def _warm_next(self, slot: Slot) -> bool:
        """Start the correctness workers of this thread's next evaluation of the task
        (prestart.py): what `evaluate(..., prestarted=True)` takes, if its settings match."""
        return prestart.warm(
            self.task,
            self.device,
            sandbox=self.sandbox,
            gpu=slot.gpu,
            workers=default_workers(self.device, self.task),
            timeout_s=self.task.spec.rules.eval_timeout_s,
            head_s=PRESTART_HEAD_S,
        )

    def _overlap(self) -> bool:
        """Whether the benchmark's workers start during correctness and the next
        evaluation's correctness workers before its candidate exists: `overlap`, or by
        default on a GPU (a CPU's cores are the correctness workers' own)."""
        return self.overlap if self.overlap is not None else self.device == "cuda"

    def _benchmark(
        self, slot: Slot, dtypes: list[str] | None, head_start: bool
    ) -> PendingBenchmark:
        task = self.task
        return start_benchmark(
            task,
            self.path,
            best=self.best,
            device=self.device,
            shapes=self.shapes,
            dtype=(dtypes or task.spec.dtypes)[0],
            sandbox=self.sandbox,
            progress=self.progress,
            gpu=slot.gpu,
            compiled=self.compiled,
            # correctness has this long (its workers are killed at the task's limit)
            head_start_s=task.spec.rules.eval_timeout_s + 60.0 if head_start else 0.0,
            # round 0 (the baseline, the first best) always; a candidate once accepted
            defer_turn=self.best is not None,
        )

    def shipped(self) -> ShippedJob:
        """This job with its files as bytes, for an executor on another process or machine
        (Ray): the task folder's entries (its workspace and .git left out), the candidate
        and the best. Progress is not shipped: a remote job reports only its record."""
        return ShippedJob(
            name=self.name,
            task_entries=_task_entries(self.task.folder, self.task.digest()),
            candidate=self.path.read_bytes(),
            best=self.best.read_bytes() if self.best else None,
            device=self.device,
            measured=self.measured,
            sandbox=self.sandbox,
            shapes=self.shapes,
            dtypes=self.dtypes,
            compiled=self.compiled,
        )


@dataclass(frozen=True)
class ShippedJob:
    """An `EvaluationJob` that carries its files: run on a slot anywhere kernelloop is
    installed, it lays the task folder out in a temporary folder (the same entries, so the
    same task digest), writes the candidate and the best beside it, and runs the same
    sandboxed evaluation there."""

    name: str
    task_entries: dict[str, files.Entry]
    candidate: bytes
    best: bytes | None
    device: str
    measured: bool
    sandbox: str = "auto"
    shapes: str | None = None
    dtypes: tuple[str, ...] | None = None
    retried_after: str = ""  # see EvaluationJob
    compiled: bool = False

    def again(self, reason: str) -> ShippedJob:
        """This job as a second attempt, after the first was lost for `reason`."""
        return replace(self, retried_after=reason)

    def __call__(self, slot: Slot) -> Evaluated:
        with tempfile.TemporaryDirectory(prefix="kernelloop-shipped-") as tmp:
            folder = Path(tmp) / "task"
            folder.mkdir()
            files.restore(folder, self.task_entries)
            path = Path(tmp) / f"{self.name}.py"
            path.write_bytes(self.candidate)
            best = None
            if self.best is not None:
                best = Path(tmp) / "best.py"
                best.write_bytes(self.best)
            job = EvaluationJob(
                name=self.name,
                task=load_task(folder),
                path=path,
                best=best,
                device=self.device,
                measured=self.measured,
                sandbox=self.sandbox,
                shapes=self.shapes,
                dtypes=self.dtypes,
                retried_after=self.retried_after,
                compiled=self.compiled,
            )
            return job(slot)


@functools.lru_cache(maxsize=8)
def _task_entries(folder: Path, digest: str) -> dict[str, files.Entry]:
    """The task folder's entries, read once per content (`digest` keys the cache)."""
    return files.entries(folder)


def evaluation_job(
    run: Run, source: str, name: str, best: Best | None, references: References | None = None
) -> EvaluationJob:
    """The job that evaluates `source` (written to the run's scratch folder as NAME.py)
    against `best` with the run's settings; `references`: its round's (see `submit`)."""
    path = run.scratch / f"{name}.py"
    path.write_text(source)
    return EvaluationJob(
        name=name,
        task=run.task,
        path=path,
        best=best.path if best else None,
        device=run.device,
        measured=run.measured,
        sandbox=run.sandbox,
        shapes=run.shapes,
        dtypes=tuple(run.dtypes) if run.dtypes else None,
        progress=run.view.status,
        references=references,
        compiled=run.compiled,
    )


def submit(
    run: Run, source: str, name: str, best: Best | None, references: References | None = None
) -> Future[Evaluated]:
    """Hand the candidate's evaluation to the run's executor; a future of its record.
    `references`: one per round, shared by its candidates (the same secret inputs, each
    float64 reference computed once); None: fresh seeds for this evaluation alone. A job
    shipped to another process (Ray) leaves them behind and draws its own."""
    return run.executor.submit(evaluation_job(run, source, name, best, references))


def collect(future: Future[Evaluated]) -> Evaluated:
    """The finished job's record; a job the executor lost (its Ray actor died twice) is an
    infrastructure failure with no evaluation, as a sandbox that never started is."""
    try:
        return future.result()
    except JobLost as e:
        return Evaluated(None, infrastructure=f"the executor lost the evaluation: {e}")


def evaluate_source(run: Run, source: str, name: str, best: Best | None) -> Evaluated:
    """The candidate's evaluation, waited for (round 0's baseline)."""
    return collect(submit(run, source, name, best))
