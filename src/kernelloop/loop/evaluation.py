"""A candidate's evaluation as a round needs it, and the rule that tells an
infrastructure failure from the candidate's fault.

Correctness runs in the sandbox; where timings count the candidate is then benchmarked
against the best and gated. The source is written to a file for the sandboxed worker:
this process never imports it.

Infrastructure, not the candidate (retried once, then recorded as `infrastructure`):
- the sandbox could not start (`SandboxError`): no candidate code ran;
- the correctness worker's verdict is `crash` because it was killed by SIGKILL (exit
  status -9, or 137 where bubblewrap reports its child's death): what the OOM killer, an
  operator or a dying GPU context in another process does;
- the benchmark produced no usable record because its worker was killed the same way.
A candidate can kill itself with SIGKILL (or exit with 137) and so look like the second
case. The rule is safe against that: the retry is a whole fresh evaluation (new inputs,
new sandbox) that must pass on its own, and a second infrastructure failure records a row
with no evaluation, which never promotes. At worst such a candidate gets one retry and an
`infrastructure` row, and costs its round. What the rule does not catch (a GPU fault that
surfaces as a CUDA error inside the worker) stays the candidate's fault: it reads exactly
like an illegal memory access of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelloop.errors import SandboxError
from kernelloop.evaluate.trusted.bench import benchmark
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.gate import decide
from kernelloop.loop.state import Best, Evaluated, Run
from kernelloop.objective import shape_table

# "the worker died with exit code -9 (killed by SIGKILL)" (evaluate), "the benchmark
# worker died with exit code 137" (bench, under bubblewrap).
_KILLED = re.compile(r"worker died with exit code (-9|137)\b")


def infrastructure_fault(ev: Evaluated) -> str:
    """Why `ev` has no verdict through no act of the candidate, or "" when it stands."""
    rec = ev.record
    if rec is not None and rec.verdict.category == "crash":
        if killed := next((r for r in rec.verdict.reasons if _KILLED.search(r)), None):
            return f"the sandboxed worker was killed from outside ({killed})"
    if ev.bench is not None and ev.gate is not None and ev.gate.category == "timing":
        if killed := next((p for p in ev.bench.problems if _KILLED.search(p)), None):
            return f"the benchmark's worker was killed from outside ({killed})"
    return ""


def evaluate_source(run: Run, source: str, name: str, best: Best | None) -> Evaluated:
    """The candidate's evaluation; one retry after an infrastructure failure."""
    path = run.scratch / f"{name}.py"
    path.write_text(source)
    first = _once(run, path, name, best)
    if not first.infrastructure:
        return first
    run.view.status(f"{name}: {first.infrastructure}; evaluating it once more")
    second = _once(run, path, name, best)
    if second.infrastructure:
        second.infrastructure = f"twice: {first.infrastructure}; then {second.infrastructure}"
    elif second.record is not None:
        second.record.warnings.append(
            f"evaluated a second time: the first attempt failed through no fault of the "
            f"candidate ({first.infrastructure})"
        )
    return second


def _once(run: Run, path: Path, name: str, best: Best | None) -> Evaluated:
    rules, say = run.task.spec.rules, run.view.status
    try:
        say(f"checking {name}")
        record = evaluate(
            run.task,
            path,
            device=run.device,
            shapes=run.shapes,
            dtypes=run.dtypes,
            sandbox=run.sandbox,
            progress=say,
            timing=False,
        )
        ev = Evaluated(record)
        if record.verdict.accepted and run.measured:
            say(f"benchmarking {name}")
            dtype = (run.dtypes or run.task.spec.dtypes)[0]
            bench = benchmark(
                run.task,
                path,
                best=best.path if best else None,
                device=run.device,
                shapes=run.shapes,
                dtype=dtype,
                sandbox=run.sandbox,
                progress=say,
            )
            gate = decide(record, bench, rules)
            ev = Evaluated(record, bench, gate, shape_table(bench, gate))
    except SandboxError as e:
        return Evaluated(None, infrastructure=f"the sandbox could not start ({e})")
    ev.infrastructure = infrastructure_fault(ev)
    return ev
