"""`kernelloop import kernelbench`: KernelBench problems as task folders (issue #14)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from kernelloop.errors import KernelloopError
from kernelloop.task import load_task

import_app = typer.Typer(help="Bring problems from other benchmarks in as task folders.")


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")


@import_app.command("kernelbench")
def kernelbench_cmd(
    source: Annotated[Path, typer.Argument(help="a KernelBench problem file, or a folder of them")],
    out: Annotated[
        Path, typer.Option(help="folder to write one task folder per problem in")
    ] = Path("kernelbench-tasks"),
    dtypes: Annotated[
        str,
        typer.Option(
            help="comma-separated: float32 (as KernelBench runs) and/or bfloat16, float16"
        ),
    ] = "float32",
    force: Annotated[bool, typer.Option(help="overwrite task folders that exist")] = False,
    language: Annotated[
        str,
        typer.Option(
            help="the candidates' language: triton, or cuda (C++/CUDA built with load_inline)"
        ),
    ] = "triton",
    atol: Annotated[
        float | None,
        typer.Option(help="absolute tolerance for every dtype instead of KernelBench's"),
    ] = None,
    rtol: Annotated[
        float | None,
        typer.Option(help="relative tolerance for every dtype instead of KernelBench's"),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            help="survey each problem's own baseline: judged, informative, and on a GPU "
            "A/A, timers, floor and memory plan (survey.json; exit 1 if any fails)"
        ),
    ] = False,
    device: Annotated[str, typer.Option(help="with --check: auto | cuda | cpu")] = "auto",
) -> None:
    """One task folder per problem: the Model verbatim as the reference and the PyTorch
    baseline, its own get_inputs/get_init_inputs under kernelloop's seeded RNG, its size as
    the GPU shape and scaled-down CPU shapes, KernelBench's tolerances (or --atol/--rtol).
    With --check, a self-survey of the problems' baselines (docs/task.md)."""
    from kernelloop.evaluate.trusted.run import resolve_device
    from kernelloop.evaluate.trusted.values.regions import report_line
    from kernelloop.task.kernelbench import import_problem, problem_files

    files = problem_files(source)
    console = Console()
    surveyed: list = []
    dev = resolve_device(device) if check else device
    wanted = [d.strip() for d in dtypes.split(",") if d.strip()]
    failed: list[str] = []
    # A problem file is not screened or sandboxed: it is the task's reference.
    console.print(
        f"note: {'these problem files become' if len(files) > 1 else 'the problem file becomes'}"
        " trusted code: kernelloop runs it unsandboxed (here, and as the reference in every "
        "evaluation), without the model keys; import only files you trust.",
        markup=False,
        soft_wrap=True,  # one line, however narrow the terminal
    )
    for k, path in enumerate(files, 1):
        try:
            folder = import_problem(
                path,
                out,
                wanted,
                force=force,
                language=language,
                atol=atol,
                rtol=rtol,
                warn=lambda m: console.print(f"[yellow]warning:[/] {escape(m)}"),
            )
        except KernelloopError as e:
            if len(files) == 1:
                raise
            # One problem that cannot be imported does not stop the folder's others.
            console.print(f"[{k}/{len(files)}] [red]not imported:[/] {escape(str(e))}")
            failed.append(str(e))
            if check:  # a problem the importer refuses is a failed row of the survey
                surveyed.append(_not_imported(_problem(path), str(e)))
                _survey_write(out, surveyed, dev)
            continue
        task = load_task(folder)  # what was written must load
        shapes = ", ".join(s.label for s in task.spec.shapes)
        console.print(
            f"[{k}/{len(files)}] {escape(str(folder))}  (GPU shape {shapes}; "
            f"CPU {', '.join(s.label for s in task.spec.cpu_shapes)})"
        )
        if check:
            surveyed.append(_survey(console, task, _problem(path), dev))
            _survey_write(out, surveyed, dev)  # a long survey cut short keeps its rows
            continue
        weak = report_line(task, "cpu")  # every region of the output informative?
        if weak:
            console.print(f"[yellow]warning:[/] {escape(f'{path.name}: {weak}')}")
    survey_failed = check and not _survey_end(console, out, surveyed, dev)
    if failed:
        raise KernelloopError(
            f"{len(failed)} of {len(files)} problems were not imported (each says why above); "
            f"the first: {failed[0]}"
        )
    console.print(
        f"imported {len(files)} problem(s) into {escape(str(out))}; check one with "
        f"`kernelloop evaluate {escape(str(out))}/<task> {escape(str(out))}/<task>/baseline.py`."
    )
    if survey_failed:
        raise typer.Exit(1)


def _survey(console: Console, task, problem: str, device: str):
    from kernelloop.commands.import_survey import survey_task

    row = survey_task(task, problem, device)
    mark = "[green]passed[/]" if row.passed else "[red]failed[/]"
    console.print(f"    survey {mark} ({row.seconds:.0f} s): {escape(row.line())}", soft_wrap=True)
    return row


def _problem(path: Path) -> str:
    """A survey row's name: level1/19_ReLU.py where the folder is a KernelBench level."""
    return f"{path.parent.name}/{path.name}" if path.parent.name.startswith("level") else path.name


def _not_imported(problem: str, why: str):
    from kernelloop.commands.import_survey import SurveyRow

    return SurveyRow(problem=problem, task="", checks={"imported": why})


def _survey_write(out: Path, rows: list, device: str) -> Path:
    from kernelloop.commands.import_survey import write_survey

    name = ""
    if device == "cuda":
        import torch

        name = torch.cuda.get_device_name()
    return write_survey(out, rows, device, name)


def _survey_end(console: Console, out: Path, rows: list, device: str) -> bool:
    """Write survey.json and say how many passed; whether every one did."""
    path = _survey_write(out, rows, device)
    passed = sum(r.passed for r in rows)
    console.print(
        f"survey: {passed} of {len(rows)} baselines passed every check on {device}; "
        f"{escape(str(path))}"
    )
    return passed == len(rows)
