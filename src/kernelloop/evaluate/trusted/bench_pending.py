"""A planned benchmark (bench.start_benchmark) and its run: the workers' session timed,
or nothing run where the static screen refused the candidate or the memory plan found no
room, and the benchmark record built from what happened (bench.py has the overview)."""

from __future__ import annotations

import datetime as dt
import hashlib
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.protocol import COMPILED
from kernelloop.evaluate.trusted.bench_turn import time_compiled_in_turn
from kernelloop.evaluate.trusted.clock.bench_fill import fill_shapes
from kernelloop.evaluate.trusted.clock.bench_record import (
    BenchmarkRecord,
    CompiledSlot,
    overall_speedup,
    overall_vs_compiled,
)
from kernelloop.evaluate.trusted.clock.gpu_state import read_gpu_state, throttle_warnings
from kernelloop.evaluate.trusted.clock.interleave import Evidence, Outcome, Session
from kernelloop.evaluate.trusted.clock.memory_plan import MemoryPlan, free_memory, plan_memory
from kernelloop.evaluate.trusted.launch.gpu_bind import on_gpu
from kernelloop.evaluate.trusted.run import timings_count
from kernelloop.task import Shape, Task


@dataclass
class PendingBenchmark:
    """A planned benchmark (`start_benchmark`), its workers perhaps already starting."""

    task: Task
    candidate: Path  # as given (a C++ source stays named as the user named it)
    impls: dict[str, Path]
    sources: dict[str, bytes]
    findings: list
    shapes: list[Shape]
    dtype: str
    device: str
    gpu: int | None
    best: str  # the slot the candidate must beat: "best", else "baseline"
    aa_impl: str | None
    compiled: bool
    evidence: dict[str, Evidence]
    say: Callable[[str], None]
    session: Session | None = None
    memory: MemoryPlan | None = None
    done: bool = False
    defer_turn: bool = False  # the compiled slot's turn waits for finish_compiled
    turn_waiting: str = ""  # set by run(): the slot's reason before the deferral note

    def spawn(self) -> None:
        """Start the workers' processes now (`Session.spawn`, ~0.1-0.2 s for four); nothing
        for a candidate the static screen refused. Called on the thread that will `run`
        it: a sandboxed worker dies with the thread that started it (PR_SET_PDEATHSIG
        follows the creating thread), so never from a short-lived one. Never raises (it
        runs inside the correctness judge's loop, where an exception would read as the
        candidate's): a failed start is undone and `run` starts the workers again, where
        an error is reported as always."""
        if self.session is not None and not self.done:
            try:
                self.session.spawn()
            except Exception:  # noqa: BLE001 - run() tries again and reports
                self.session.reset()

    def cancel(self) -> None:
        """End the workers of a benchmark that will not run (idempotent)."""
        self.done = True
        if self.session is not None:
            self.session.cancel()

    def run(self) -> BenchmarkRecord:
        if self.done:
            raise KernelloopError("this benchmark was already run or cancelled; start another.")
        self.done = True
        with on_gpu(self.gpu):
            return self._run()

    def replan(self) -> bool:
        """The memory plan again with the memory free now, for the slots the session has
        (which the first plan chose): its batch caps set, or — one call does not fit — the
        session cancelled. Whether it may run."""
        assert self.session is not None and self.memory is not None
        most = self.session.s.most_per_batch(self.device)
        slots = list(self.session.slot_files)
        plan = plan_memory(
            self.task, self.shapes, self.dtype, self.device, slots, [], free_memory(self.device),
            most,
        )  # fmt: skip
        plan.left_out = self.memory.left_out
        self.memory = plan
        self.say(plan.line())
        self.session.s.batch_caps = plan.caps()
        if plan.refused:
            self.session.cancel()
        return not plan.refused

    def _run(self) -> BenchmarkRecord:
        task, device, gpu, say = self.task, self.device, self.gpu, self.say
        started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        t0 = time.monotonic()
        interp = device == "cpu" and task.spec.task.language == "triton"
        gpu_before = read_gpu_state("before", gpu) if device == "cuda" else None
        outcome = Outcome()
        if self.findings:
            say(f"static screen refused the candidate: {self.findings[0].render()}")
        elif self.replan():
            assert self.session is not None
            n = len(self.session.slot_files)
            say(f"timing {n} slot(s) on {len(self.shapes)} shape(s), one sandboxed worker each")
            outcome = self.session.run()
        gpu_after = read_gpu_state("after", gpu) if device == "cuda" else None

        env = outcome.env
        if self.compiled:
            ref_path = task.file_and_function("reference")[0]
            compiled_sha = {COMPILED: hashlib.sha256(ref_path.read_bytes()).hexdigest()}
        else:
            compiled_sha = {}
        rec = BenchmarkRecord(
            task=task.name,
            task_digest=task.digest(),
            language=task.spec.task.language,
            candidate=str(self.candidate.resolve()),
            candidate_sha256=hashlib.sha256(self.sources["candidate"]).hexdigest(),
            impl_sha256={n: hashlib.sha256(b).hexdigest() for n, b in self.sources.items()}
            | compiled_sha,
            best=self.best,
            started_at=started,
            wall_s=0.0,
            device=device,
            device_name=str(env.get("device_name") or platform.machine()),
            compute_capability=env.get("compute_capability"),
            driver=(gpu_before.raw.get("driver_version") if gpu_before else None),
            torch=str(env.get("torch") or torch.__version__),
            triton=env.get("triton"),
            cuda=env.get("cuda"),
            python=str(env.get("python") or platform.python_version()),
            sandbox=outcome.mode,
            interpreter=interp,
            gpu_state=[g for g in (gpu_before, gpu_after) if g is not None],
            aa_impl=self.aa_impl,
            timings_count=timings_count(device, interp, task.spec.task.language),
            worker_log_tail=outcome.log_tail,
            timing_phase_s=outcome.timing_phase_s,
            phases_s=outcome.phases_s,
            memory=self.memory,
        )
        if self.findings:
            rec.static_findings = [f"static screen: {f.render()}" for f in self.findings]
            rec.problems.extend(rec.static_findings)
        elif self.memory is not None and self.memory.refused:
            rec.infrastructure.append(f"memory: {self.memory.refused}")
        else:
            for name in self.memory.left_out if self.memory else []:
                why = f"left out by the memory plan so the gate's slots fit ({self.memory.line()})"
                outcome.dropped.setdefault(name, why)
                if name != COMPILED:  # the compiled slot is timed in turn below
                    rec.warnings.append(f"{name} slot {why}")
            for p in outcome.problems:
                if oom := out_of_memory(p.slot, p.text):
                    rec.infrastructure.append(oom)
                else:
                    rec.problems.append(p.text)
            rec.warnings.extend(outcome.warnings)
            fill_shapes(rec, task, self.shapes, self.dtype, list(self.impls), outcome)
            throttle_warnings(rec)
            if self.compiled:
                rec.compiled = _compiled_slot(task, self.evidence[COMPILED], rec, outcome)
                if self.memory is not None and COMPILED in self.memory.left_out:
                    if self.defer_turn and not rec.problems:
                        self.turn_waiting = rec.compiled.dropped
                        rec.compiled.dropped += "; timed in turn only if the gate accepts"
                    else:
                        self._compiled_in_turn(rec)
        rec.speedup_vs_baseline = overall_speedup(rec, "baseline")
        rec.speedup_vs_compiled = overall_vs_compiled(rec) if rec.compiled else None
        rec.wall_s = round(time.monotonic() - t0, 3)
        return rec

    def finish_compiled(self, rec: BenchmarkRecord) -> None:
        """Time the compiled slot's deferred turn (`defer_turn`) for `rec`, the record
        `run()` returned; nothing when no turn waits."""
        if not self.turn_waiting or rec.compiled is None:
            return
        t0 = time.monotonic()
        rec.compiled.dropped, self.turn_waiting = self.turn_waiting, ""
        with on_gpu(self.gpu):
            self._compiled_in_turn(rec)
        rec.speedup_vs_compiled = overall_vs_compiled(rec)
        rec.wall_s = round(rec.wall_s + time.monotonic() - t0, 3)

    def _compiled_in_turn(self, rec: BenchmarkRecord) -> None:
        """The compiled slot, left out beside the gate's slots, timed after them beside
        the baseline (bench_turn.py) — only when the gate's session gave numbers."""
        assert rec.compiled is not None and self.memory is not None
        left = rec.compiled.dropped
        why = "the gate's session has problems" if rec.problems else ""
        if not why:  # (run() holds the benchmark's GPU)
            assert self.session is not None
            why = time_compiled_in_turn(
                rec,
                self.session,
                self.task,
                self.impls["baseline"],
                self.shapes,
                self.dtype,
                self.evidence[COMPILED],
                self.say,
            )
        if why:
            rec.compiled.dropped = f"{left}; {why}"
            rec.compiled.recompiles = int("recompiled during a timed call" in why)
            rec.warnings.append(f"{COMPILED} slot {rec.compiled.dropped}")
            for sb in rec.shapes:
                sb.compiled_in_turn, sb.speedup_vs_compiled = None, None
            return
        rec.compiled.dropped, rec.compiled.in_turn = "", True
        rec.compiled.shapes = [sb.shape for sb in rec.shapes]
        rec.warnings.append(
            f"{COMPILED} slot timed in turn, beside the baseline alone (no room beside the "
            "gate's slots): its speedups are the candidate's over the baseline times the "
            "baseline's over torch.compile, each pair timed side by side"
        )


def out_of_memory(slot: str, text: str) -> str:
    """'' unless `text` says a trusted implementation (the baseline, the best, the compiled
    reference) or the trusted side ran out of GPU memory; then one sentence that says it is
    infrastructure. On the H200 KernelBench level1/93 and level1/47 at their own sizes
    printed "PERFORMANCE GATE: FAIL (timing): … baseline: torch.OutOfMemoryError … 8.00
    GiB", which read as the candidate's fault (issue 34). The candidate's own OOM stays
    its failure."""
    if slot == "candidate" or not ("OutOfMemoryError" in text or "out of memory" in text):
        return ""
    who = "the trusted side" if slot in ("", "trusted") else f"the {slot}"
    return (
        f"{who} ran out of GPU memory ({text.strip().splitlines()[0][:160]}): infrastructure, "
        "not the candidate's failure — free GPU memory or time fewer or smaller shapes "
        "(--shapes), then benchmark again"
    )


def _compiled_slot(
    task: Task, ev: Evidence, rec: BenchmarkRecord, outcome: Outcome
) -> CompiledSlot:
    timed = [sb.shape for sb in rec.shapes if COMPILED in sb.impls]
    why = outcome.dropped.get(COMPILED, "")
    if not why and not rec.problems and len(timed) < len(rec.shapes):
        why = "no timing on " + ", ".join(s.shape for s in rec.shapes if s.shape not in timed)
    return CompiledSlot(
        source=task.spec.task.reference,
        shapes=timed,
        dropped=why,
        recompiles=1 if "recompiled during a timed call" in why else 0,
        eager_checked=task.spec.stochastic is None,
        prepare_s=outcome.prepare_s.get(COMPILED, {}),
        budget_s=ev.budget_s,
        total_budget_s=ev.total_s,
    )
