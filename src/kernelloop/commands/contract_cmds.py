"""`kernelloop task show TASK`: the task's contract, as the loop's agents read it."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from kernelloop.commands.common import TaskArg, WorkspaceOpt
from kernelloop.history.workspace import DB_NAME
from kernelloop.task import load_task

task_app = typer.Typer(help="Look at a task: `kernelloop task show TASK`.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(task_app, name="task")


@task_app.command("show")
def show(
    task: TaskArg,
    device: Annotated[
        str, typer.Option(help="the device candidates would be judged on: auto | cuda | cpu")
    ] = "auto",
    shapes: Annotated[
        str | None, typer.Option(help="cpu | gpu | all | comma-separated labels (as for run)")
    ] = None,
    dtypes: Annotated[
        str | None, typer.Option(help="comma-separated dtypes (default: all of the task's)")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print {section: text} as JSON")] = False,
    workspace: WorkspaceOpt = None,
    reference_error: Annotated[
        bool,
        typer.Option(
            "--reference-error",
            help="also run the task's reference in each judged dtype against itself in "
            "float64 at the shapes (random and extreme cases): how much of each tolerance "
            "PyTorch's own arithmetic uses (docs/task.md, 'Tolerances')",
        ),
    ] = False,
) -> None:
    """Print the task's contract — the text the LLM prompt and the MCP `task` tool carry:
    reference, input cases, shapes with weights and floor times, tolerances, what the
    randomness checks demand, the roofline, and the best's per-shape numbers where a run
    has recorded one. Exit 0 shown, 2 usage or setup error (the task's input generator
    not following its declared dims and dtypes)."""
    t = load_task(task)  # before the imports below (torch): a wrong TASK is said in ~1 s
    from kernelloop.evaluate.trusted.run import resolve_device
    from kernelloop.loop.context import task_contract
    from kernelloop.task.inputs_check import check_inputs_apart

    # The contract names the declared shapes and dtypes: checked against what the input
    # generator really returns first, as run and evaluate do (one sentence, exit 2).
    check_inputs_apart(t)
    contract = task_contract(
        t,
        resolve_device(device),
        _recorded_best(t, workspace),
        shapes,
        [d.strip() for d in dtypes.split(",")] if dtypes else None,
    )
    errors = _reference_error(t, shapes, dtypes) if reference_error else None
    # Every region of the output informative in some case, or the inputs named too weak
    # (evaluate/trusted/values/regions.py).
    from kernelloop.evaluate.trusted.values.regions import report_line

    weak = report_line(t, resolve_device(device))
    if json_out:
        out = dict(contract.sections)
        if errors is not None:
            out["reference_error"] = errors  # type: ignore[assignment]
        if weak:
            out["weak_inputs"] = weak  # type: ignore[assignment]
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(contract.text() + "\n" + (f"\nwarning: {weak}\n" if weak else ""))
        if errors is not None:
            sys.stdout.write(_error_text(errors) + "\n")


def _reference_error(task, shapes: str | None, dtypes: str | None) -> list[dict]:
    """The reference's own error, measured on the CPU: at the task's CPU shapes unless
    --shapes names others (gpu, all, or labels; GPU sizes in float64 take a while)."""
    from kernelloop.task.reference_error import measure_apart

    which = shapes or "cpu"
    if which in ("cpu", "gpu", "all"):
        picked = {"cpu": task.spec.cpu_shapes, "gpu": task.spec.shapes}.get(
            which, [*task.spec.cpu_shapes, *task.spec.shapes]
        )
    else:
        picked = [task.find_shape(label.strip()) for label in which.split(",")]
    wanted = [d.strip() for d in dtypes.split(",")] if dtypes else list(task.spec.dtypes)
    return measure_apart(task, [s.label for s in picked], wanted)


def _error_text(rows: list[dict]) -> str:
    """Per dtype, the worst of every shape and case (`--json` keeps every row)."""
    lines = [
        "",
        "### The reference's own error (in the dtype against float64, on the CPU)",
        f"{len(rows)} runs (shapes × dtypes × cases); per dtype the worst:",
        "| dtype | worst shape, case | max rel err | tolerance used |",
        "|---|---|---|---|",
    ]
    for d in dict.fromkeys(r["dtype"] for r in rows):
        r = max((r for r in rows if r["dtype"] == d), key=lambda r: r["tol_used"] or 0.0)
        lines.append(
            f"| {d} | {r['shape']}, {r['case']} | {r['max_rel_err']:.2e} | "
            f"{r['tol_used']:.2g} of atol {r['atol']:g}, rtol {r['rtol']:g} |"
        )
    return "\n".join(lines)


def _recorded_best(task, workspace):
    """The task's promoted best from its history (None where no run has recorded one)."""
    from kernelloop.history import HistoryStore
    from kernelloop.loop.promotion import stored_numbers
    from kernelloop.loop.state import Best

    db = task.workspace(workspace) / DB_NAME
    if not db.is_file():
        return None
    with HistoryStore.open(db) as store:
        best = store.promoted_best(task.name)
        if best is None:
            return None
        record, _, rows, pct = stored_numbers(task, store, best.id)
        return Best(best.id, best.source, record, best.objective or 1.0, pct, shapes=rows)
