"""`kernelloop init` and `kernelloop evaluate`."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelloop.commands.candidate_file import check_candidate_file
from kernelloop.commands.labels import print_rejection
from kernelloop.commands.progress import progress_lines
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.values.record import NOT_THE_CANDIDATES, EvaluationRecord
from kernelloop.evaluate.trusted.values.stages import summary as stage_summary
from kernelloop.task import load_task, words

TEMPLATE = Path(__file__).resolve().parent.parent / "task" / "template"


def register(app: typer.Typer) -> None:
    app.command("init")(init)
    app.command("evaluate")(evaluate_cmd)


def init(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME", help="folder to create (its last part becomes the task name)"
        ),
    ],
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="a KernelBench-style file (class Model, get_inputs, get_init_inputs) to "
            "build the task from instead of the skeleton",
        ),
    ] = None,
    like: Annotated[
        Path | None,
        typer.Option(
            "--like",
            metavar="TASK",
            help="copy this task folder (its history and caches left out) instead of "
            "writing the skeleton",
        ),
    ] = None,
) -> None:
    """Write a new task folder: a skeleton for a new op (task.toml with TODOs, reference,
    inputs, baseline: a small valid example to replace), a copy of a task (`--like`), or
    one built from a KernelBench-style file (`--from`, as `kernelloop import kernelbench`).
    Exit 0 written, 2 usage error."""
    dst = Path(name)
    if dst.exists():
        raise KernelloopError(f"{dst} already exists; pick a new folder name or remove it first.")
    if from_file is not None and like is not None:
        raise KernelloopError("--from and --like both name a source; pass one of them.")
    if like is not None:
        _init_like(like, dst)
        return
    if from_file is not None:
        from kernelloop.task.kernelbench import import_problem

        if not from_file.is_file():
            raise KernelloopError(f"{from_file} is not a file; pass a KernelBench-style .py file.")
        console = Console()
        import_problem(
            from_file,
            dst.parent,
            ["float32"],
            name=dst.name,
            warn=lambda m: console.print(f"[yellow]warning:[/] {escape(m)}"),
        )
        load_task(dst)
        console.print(
            f"created task [bold]{dst}[/] from {from_file}: check it with "
            f"`kernelloop evaluate {dst} {dst}/baseline.py`."
        )
        return
    shutil.copytree(TEMPLATE, dst, ignore=shutil.ignore_patterns("__pycache__"))
    toml = dst / "task.toml"
    toml.write_text(toml.read_text().replace("TASK_NAME", _task_name(dst)))
    load_task(dst)  # the skeleton must be valid as written
    Console(soft_wrap=True).print(
        f"created task {dst}: replace the TODOs in task.toml, reference.py, inputs.py and "
        f"baseline.py, then check it with `{_cli()} task show {dst}` and "
        f"`{_cli()} evaluate {dst} {dst}/baseline.py`.",
        markup=False,
    )


def _task_name(dst: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", dst.resolve().name)


def _cli() -> str:
    from kernelloop.commands.interrupt import invocation

    return shlex.join(invocation())


def _init_like(src: Path, dst: Path) -> None:
    """A copy of task `src` named after `dst`: its files, not its history (.kernelloop),
    caches or the candidates it was tested with."""
    old = load_task(src)
    shutil.copytree(
        old.folder,
        dst,
        ignore=shutil.ignore_patterns(".kernelloop", "__pycache__", "candidates", ".git"),
    )
    toml = dst / "task.toml"
    text = toml.read_text()
    quoted = re.escape(old.name)
    text, n = re.subn(rf'(?m)^(name\s*=\s*)"{quoted}"', rf'\g<1>"{_task_name(dst)}"', text, count=1)
    if n != 1:
        shutil.rmtree(dst)
        raise KernelloopError(
            f'could not find `name = "{old.name}"` in {old.toml_path} to rename the copy; '
            "copy the folder by hand and set [task] name."
        )
    toml.write_text(text)
    load_task(dst)
    Console(soft_wrap=True).print(
        f"created task {dst} as a copy of {old.name} ({src}); check it with "
        f"`{_cli()} task show {dst}`.",
        markup=False,
    )


def evaluate_cmd(
    task: Annotated[Path, typer.Argument(metavar="TASK", help="task folder (with task.toml)")],
    candidate: Annotated[
        Path,
        typer.Argument(
            metavar="CANDIDATE",
            help="candidate .py file defining the task's entry function (a cuda task: "
            "or a .cu/.cpp source binding it with PYBIND11_MODULE)",
        ),
    ],
    json_out: Annotated[
        bool, typer.Option("--json", help="print the evaluation record as JSON")
    ] = False,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    shapes: Annotated[
        str | None,
        typer.Option(
            help="cpu | gpu | all | comma-separated labels like 4096x8000 "
            "(default: the device's shapes)"
        ),
    ] = None,
    dtypes: Annotated[
        str | None, typer.Option(help="comma-separated dtypes (default: all of the task's)")
    ] = None,
    sandbox: Annotated[
        str, typer.Option(help="auto (= bwrap) | bwrap | none (no isolation: see docs/security.md)")
    ] = "auto",
    timeout: Annotated[
        float | None, typer.Option(min=1, help="wall-clock limit for the worker, seconds")
    ] = None,
    timing: Annotated[
        bool | None,
        typer.Option(
            "--timing/--no-timing",
            help="time a candidate that passed (default: only where timings count, "
            "never under the Triton interpreter)",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="correctness workers the calls are split between (default: 2 on a CPU "
            "with 2+ cores, 1 on a GPU)",
        ),
    ] = None,
) -> None:
    """Check a candidate for correctness (and time it on a GPU) in a sandboxed worker.
    Exit 0 judged correct, 1 rejected, 2 not judged: a usage or setup error (a bad candidate
    file, the task's inputs or reference failing) or kernelloop's own failure."""
    t = load_task(task)
    check_candidate_file(candidate)
    # Imported after the arguments are checked: a usage error prints in ~1 s, not ~3 s
    # (the evaluation's modules import torch; issue 36 asks usage errors in <= 2 s).
    from kernelloop.evaluate.trusted.run import evaluate
    from kernelloop.task.inputs_check import check_inputs_apart

    check_inputs_apart(t)
    err = Console(stderr=True)
    with progress_lines(err, "evaluating…") as say:
        record = evaluate(
            t,
            candidate,
            device=device,
            shapes=shapes,
            dtypes=[d.strip() for d in dtypes.split(",")] if dtypes else None,
            timing=timing,
            sandbox=sandbox,
            timeout_s=timeout,
            progress=say,
            workers=workers,
        )
    if json_out:
        # The record as stored, plus the outcome in the one vocabulary (task/words.py).
        data = {**json.loads(record.model_dump_json()), "outcome": outcome(record)}
        data["tol_used_max"] = tolerance_used(record)
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        print_record(record, Console())
    if record.verdict.accepted:
        raise typer.Exit(0)
    # The task's own code failed (its reference or inputs: setup), or kernelloop's did
    # (internal): no verdict on the candidate, so not "rejected".
    raise typer.Exit(2 if record.verdict.category in NOT_THE_CANDIDATES else 1)


def print_record(record: EvaluationRecord, console: Console) -> None:
    env = record.environment
    console.print(
        f"[bold]{record.task}[/] · {Path(record.candidate).name} · {env.device_name} "
        f"({env.device}) · sandbox={env.sandbox} · {record.wall_s:.1f} s"
    )
    for w in record.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(w)}")
    suites: dict[tuple[str, str], list] = {}
    for c in record.checks:
        suites.setdefault((c.suite, c.dtype), []).append(c)
    table = Table(
        "suite", "dtype", "checks", "passed", "max rel err", "tol used", title="correctness"
    )
    for (suite, dtype), cs in sorted(suites.items()):
        n_ok = sum(c.passed for c in cs)
        rels = [c.max_rel_err for c in cs if c.max_rel_err is not None]
        used = [c.tol_used for c in cs if c.tol_used is not None]
        table.add_row(
            suite,
            dtype,
            str(len(cs)),
            f"[{'green' if n_ok == len(cs) else 'red'}]{n_ok}[/]",
            f"{max(rels):.2e}" if rels else "-",
            _share(max(used)) if used else "-",
        )
    if record.checks:
        console.print(table)
    if record.kernels:
        kt = Table(
            "kernel",
            "specialization (dtypes, constexprs)",
            "regs",
            "spills",
            "shared B",
            "warps",
            "layout conv.",
            title="compile (worker-reported)",
        )
        for k in record.kernels:
            kt.add_row(
                k.name,
                escape(k.specialization or "-"),
                str(k.n_regs),
                str(k.n_spills),
                str(k.shared_bytes),
                str(k.num_warps),
                "-" if k.convert_layouts is None else str(k.convert_layouts),
            )
        console.print(kt)
    if record.stages:
        console.print(f"stages: {stage_summary(record.stages)}", markup=False)
    if record.timings:
        title = "timing" if record.timings_count else "timing (interpreter: does not count)"
        tt = Table(
            "shape", "dtype", "impl", "median ms", "p20–p80 ms", "n", "% of floor", title=title
        )
        for t in record.timings:
            tt.add_row(
                t.shape,
                t.dtype,
                t.impl,
                f"{t.median_ms:.4f}",
                f"{t.p20_ms:.4f}–{t.p80_ms:.4f}",
                str(t.n),
                f"{t.pct_of_floor:.1f}" if t.pct_of_floor else "-",
            )
        console.print(tt)
    v = record.verdict
    if v.accepted:
        timed = "" if record.timings_count else ", not timed"
        console.print(
            f"[bold green]{words.JUDGED_CORRECT_HEADLINE}{timed}[/]: every check passed"
            + ("" if record.timings_count else " (timings on this device do not count)")
        )
        if (used := tolerance_used(record)) is not None:
            console.print(
                f"  at most {_share(used['share'])} of the tolerance used ({used['check']}; "
                'docs/task.md, "Tolerances")',
                highlight=False,
                markup=False,
            )
        if v.judged_on:
            console.print(f"  {v.judged_on}", highlight=False, markup=False)
    else:
        print_rejection(
            console,
            v.category,
            v.reasons,
            note=" (not run)" if record.environment.sandbox == "not started" else "",
        )


def outcome(record: EvaluationRecord) -> str:
    """`evaluate`'s outcome: judged correct (not timed where timings do not count) or
    rejected [category]."""
    v = record.verdict
    if not v.accepted:
        return f"{words.REJECTED} [{v.category}]"
    return words.JUDGED_CORRECT if record.timings_count else words.NOT_TIMED


def tolerance_used(record: EvaluationRecord) -> dict | None:
    """The largest share of its tolerance any value check used, max |out - ref| / (atol +
    rtol·|ref|) (1 is the limit), and the check it was in; None where nothing was compared."""
    used = [c for c in record.checks if c.tol_used is not None]
    if not used:
        return None
    worst = max(used, key=lambda c: c.tol_used or 0.0)
    check = f"{worst.suite}/{worst.case} {worst.shape} {worst.dtype}"
    return {"share": worst.tol_used, "check": check}


def _share(x: float) -> str:
    """A share of the tolerance: "39%", "0.4%", "<0.1%"."""
    return f"{x:.0%}" if x >= 0.1 else f"{x:.1%}" if x >= 0.001 else "<0.1%"
