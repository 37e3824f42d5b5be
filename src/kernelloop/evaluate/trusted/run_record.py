"""The parts of an evaluation's record that `run.evaluate` assembles: the verdict as the
worker's process and messages leave it (``_Verdict`, `_process_verdict`), the environment
it ran in, the timings of the first look, the log tail, and the record of a candidate
the static screen refused."""

from __future__ import annotations

import hashlib
import platform
import re
import shutil
import subprocess
import time
from pathlib import Path

import torch

from kernelloop.evaluate.protocol import quantiles
from kernelloop.evaluate.trusted.channel import channel
from kernelloop.evaluate.trusted.channel.text import (
    LOG_CHARS,
    candidate_text,
    import_reason,
    last_line,
)
from kernelloop.evaluate.trusted.values.plan import Plan
from kernelloop.evaluate.trusted.values.record import (
    Environment,
    EvaluationRecord,
    TimingStats,
    Verdict,
)
from kernelloop.evaluate.trusted.values.stages import StageClock
from kernelloop.task import Shape, Task
from kernelloop.task.roofline import floor_on


def _log_tail(results: list) -> str:
    """The end of each worker's stderr (cleaned; with several workers, each under its own
    line and an equal share of the record's characters)."""
    if len(results) == 1:
        return candidate_text(results[0].stderr.decode(errors="replace"), LOG_CHARS, multiline=True)
    share = LOG_CHARS // len(results)
    parts = []
    for k, r in enumerate(results):
        head = f"[worker {k + 1} of {len(results)}]"
        room = share - len(head) - 2  # its line's newline, the newline between parts
        text = candidate_text(r.stderr.decode(errors="replace"), room, multiline=True)
        if text:
            parts.append(f"{head}\n{text}")
    return "\n".join(parts)


class _Verdict:
    """Reasons in the order found; the first rejection's category is the verdict's."""

    def __init__(self) -> None:
        self.category = "accepted"
        self.reasons: list[str] = []
        self.warnings: list[str] = []

    def reject(self, category: str, why: str) -> None:
        if self.category == "accepted":
            self.category = category
        if why not in self.reasons:  # several workers can say the same (an import error)
            self.reasons.append(why)


def _process_verdict(verdict: _Verdict, state: dict, result, plan: Plan, timeout_s: float) -> None:
    """What the worker's facts, its process and its messages' completeness add."""
    for cat, why in channel.worker_facts(state):
        verdict.reject(cat, why)
    if getattr(result, "stopped", False):
        # Stopped at its first failed check: the verdict is already a rejection, and the
        # kill, the unfinished protocol and the calls never run are the trusted side's doing.
        if result.stray_killed:
            verdict.warnings.append(
                f"killed {result.stray_killed} process(es) when the worker was stopped"
            )
        verdict.warnings.extend(state["warnings"])
        return
    if result.stray_killed and state["done"] and not result.timed_out:
        # After a clean finish nothing may be left; after a kill, the dying worker itself counts.
        verdict.reject(
            "tamper", f"killed {result.stray_killed} process(es) the worker left running"
        )
    elif result.stray_killed:
        verdict.warnings.append(f"killed {result.stray_killed} process(es) the worker left running")
    if state["import_error"]:
        who = (
            state["import_impl"]
            if state.get("import_impl") not in (None, "candidate")
            else "the candidate"
        )
        # `compile` only where a compiler raised (the worker says so by the exception's
        # class or frame, never by its text); any other error at import is a crash
        verdict.reject(
            "compile" if state.get("import_compiler") else "crash",
            f"{who} failed to import: {import_reason(state['import_error'])}",
        )
    if result.timed_out:
        verdict.reject(
            "timeout", f"the worker exceeded its {timeout_s:g} s wall-clock limit and was killed"
        )
    elif state["protocol"]:
        pass  # already the first reason
    elif state["fatal"]:
        verdict.reject("crash", f"the worker stopped: {last_line(state['fatal'])}")
    elif result.returncode != 0:
        verdict.reject(
            "crash",
            f"the worker died with exit code {result.returncode} "
            f"({_signal_name(result.returncode)})",
        )
    elif not state["done"] and not state["import_error"]:
        verdict.reject("crash", "the worker ended without finishing its protocol")
    missing = [c.id for c in plan.calls if c.id not in state["seen"]]
    if missing and not state["import_error"]:
        verdict.reject(
            "crash", f"{len(missing)} planned call(s) produced no result, e.g. {missing[0]}"
        )
    verdict.warnings.extend(state["warnings"])


def _screened_out(
    task: Task,
    candidate: Path,
    source: bytes,
    started: str,
    t0: float,
    device: str,
    findings: list,
    clock: StageClock,
) -> EvaluationRecord:
    """The record of a candidate the static screen refused: no worker ever started."""
    category = "compile" if findings[0].rule == "syntax" else "static"
    reasons = [f"static screen: {f.render()}" for f in findings]
    return EvaluationRecord(
        task=task.name,
        task_digest=task.digest(),
        candidate=str(candidate),
        candidate_sha256=hashlib.sha256(source).hexdigest(),
        started_at=started,
        wall_s=round(time.monotonic() - t0, 3),
        environment=_environment({}, device, "not started"),
        stages=clock.stages(),
        verdict=Verdict(accepted=False, category=category, reasons=reasons[:20]),
    )


def _timing(task: Task, shape: Shape, slot: str, r, dtype: str, device_name: str) -> TimingStats:
    floor = floor_on(task, shape, dtype, device_name)  # the roofline floor (task/roofline.py)
    floor_ms = floor.ms if floor else None
    med, p20, p80 = quantiles(r.samples_ms)
    pct = 100.0 * floor_ms / med if floor_ms and med > 0 else None
    return TimingStats(
        impl=slot,
        shape=shape.label,
        dtype=dtype,
        median_ms=med,
        p20_ms=p20,
        p80_ms=p80,
        n=len(r.samples_ms),
        method=r.method,
        floor_ms=floor_ms,
        floor_bound=floor.bound if floor else None,
        pct_of_floor=pct,
    )


def _environment(hello: dict, device: str, mode: str, gpu: int | None = None) -> Environment:
    clocks: dict[str, str] = {}
    driver = None
    if device == "cuda" and shutil.which("nvidia-smi"):
        q = (
            "driver_version,clocks.sm,clocks.mem,clocks_throttle_reasons.active,"
            "temperature.gpu,power.draw"
        )
        try:
            line = subprocess.run(
                ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"]
                + (["-i", str(gpu)] if gpu is not None else []),
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.splitlines()[0]
            vals = [v.strip() for v in line.split(",")]
            driver = vals[0]
            clocks = dict(zip(q.split(",")[1:], vals[1:], strict=False))
        except (OSError, IndexError, subprocess.TimeoutExpired):
            pass
    return Environment(
        device=device,
        device_name=str(hello.get("device_name") or platform.machine()),
        compute_capability=hello.get("compute_capability"),
        driver=driver,
        torch=str(hello.get("torch") or torch.__version__),
        triton=hello.get("triton"),
        cuda=hello.get("cuda"),
        python=str(hello.get("python") or platform.python_version()),
        sandbox=mode,
        interpreter=bool(hello.get("interpreter", device == "cpu")),
        clocks=clocks,
    )


def _signal_name(code: int | None) -> str:
    import signal

    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return "non-zero exit"


# Triton ops the interpreter runs in order on numpy where a GPU runs a parallel tree: the
# order of rounding, and where an intermediate overflows, are not what the GPU does. A
# cumprod scan that overflows on the GPU passed the CPU interpreter (issue 46 item 6).
_SEQUENTIAL = re.compile(r"\btl\.(cumsum|cumprod|associative_scan)\s*\(")


def interpreter_note(source: bytes) -> list[str]:
    """The warning a verdict judged under the interpreter carries where the candidate uses
    a scan the interpreter runs sequentially (none otherwise)."""
    found = sorted(set(_SEQUENTIAL.findall(source.decode(errors="replace"))))
    if not found:
        return []
    ops = ", ".join(f"tl.{f}" for f in found)
    return [
        f"judged under Triton's interpreter, which runs {ops} in order on the CPU: a GPU's "
        "parallel scan rounds (and can overflow) in another order, not exercised here; "
        "judge it on a GPU before trusting it"
    ]
