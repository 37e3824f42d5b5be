"""`kernelloop gate-check`: the gate's strength on one task (docs/gate-check.md)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelloop.commands.progress import progress_lines
from kernelloop.task import load_task


def register(app: typer.Typer) -> None:
    app.command("gate-check")(gate_check_cmd)


def gate_check_cmd(
    task: Annotated[Path, typer.Argument(help="task folder (with task.toml)")],
    kernel: Annotated[
        Path | None,
        typer.Argument(help="a correct Triton kernel to mutate (default: the task's baseline)"),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    shapes: Annotated[
        str | None, typer.Option(help="as `kernelloop evaluate --shapes` (default: the device's)")
    ] = None,
    dtypes: Annotated[
        str | None, typer.Option(help="comma-separated dtypes (default: all of the task's)")
    ] = None,
    sandbox: Annotated[str, typer.Option(help="auto (= bwrap) | bwrap | none")] = "auto",
    workers: Annotated[
        int | None, typer.Option(min=1, help="correctness workers per evaluation")
    ] = None,
    max_mutants: Annotated[
        int | None,
        typer.Option(min=1, help="judge at most this many mutants, spread over the operators"),
    ] = None,
    max_equivalents: Annotated[
        int | None, typer.Option(min=1, help="judge at most this many equivalent rewrites")
    ] = None,
    operators: Annotated[
        str | None, typer.Option(help="comma-separated mutation operators (default: all)")
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(help="leave out mutants whose description contains this (repeatable)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="the sample's seed (same seed, same mutants)")] = 0,
    min_kill: Annotated[float, typer.Option(help="the kill rate that must hold")] = 0.98,
    max_false_reject: Annotated[
        float, typer.Option(help="the false-rejection rate that must hold")
    ] = 0.0,
) -> None:
    """Mutate a correct kernel and judge every mutant and equivalent rewrite through the
    real gate: kill rate per suite, false rejections, survivors with their diffs.
    Exit 0 when the thresholds hold, 1 when not, 2 on a setup error."""
    from kernelloop.evaluate.gatecheck.run import gate_check

    t = load_task(task)
    err = Console(stderr=True)
    with progress_lines(err, "gate-check…") as say:
        report = gate_check(
            t,
            kernel,
            device=device,
            dtypes=[d.strip() for d in dtypes.split(",")] if dtypes else None,
            shapes=shapes,
            sandbox=sandbox,
            workers=workers,
            max_mutants=max_mutants,
            max_equivalents=max_equivalents,
            operators=[o.strip() for o in operators.split(",")] if operators else None,
            exclude=exclude,
            seed=seed,
            progress=say,
        )
    ok = report.meets(min_kill, max_false_reject)
    if json_out:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        print_report(report, Console(), min_kill, max_false_reject, ok)
    raise typer.Exit(0 if ok else 1)


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def print_report(report, console: Console, min_kill: float, max_fr: float, ok: bool) -> None:
    from kernelloop.evaluate.gatecheck.report import TASK_FINDING

    console.print(
        f"[bold]{report.task}[/] · {Path(report.kernel).name} · {report.device} · "
        f"sandbox={report.sandbox} · dtypes {','.join(report.dtypes)} · {report.wall_s:.0f} s"
    )
    by_suite: dict[str, Counter] = {}
    for m in report.mutants:
        if m.outcome == "killed":
            by_suite.setdefault(m.killed_by or m.category, Counter())[m.operator] += 1
    st = Table("killed by (suite or category)", "mutants", "operators", title="kills per suite")
    for suite, ops in sorted(by_suite.items(), key=lambda kv: -sum(kv[1].values())):
        st.add_row(suite, str(sum(ops.values())), ", ".join(f"{o} {n}" for o, n in ops.items()))
    console.print(st)
    ot = Table(
        "operator",
        "judged",
        "killed",
        "survived",
        "of which the task's inputs cannot tell",
        title="operators",
    )
    ops: dict[str, Counter] = {}
    for m in report.mutants:
        ops.setdefault(m.operator, Counter())[m.outcome] += 1
        ops[m.operator]["task_finding"] += m.task_finding
    for op, c in ops.items():
        ot.add_row(
            op,
            str(sum(v for k, v in c.items() if k != "task_finding")),
            str(c["killed"]),
            f"[{'red' if c['survived'] else 'green'}]{c['survived']}[/]",
            str(c["task_finding"]),
        )
    console.print(ot)
    console.print(
        f"mutants: {len(report.mutants)} judged of {report.mutants_generated} generated · "
        f"kill rate {_rate(report.kill_rate)} ({report.killed} killed, {report.survived} "
        f"survived, {report.task_findings} of them a finding about the task; nothing excluded)"
    )
    if report.equivalent:
        console.print(
            f"proven equivalent (a known equivalent rewrite; not counted): {report.equivalent}"
        )
    if report.stillborn:
        console.print(
            f"stillborn (the compiler itself failed: its finding, not the gate's; not counted): "
            f"{report.stillborn}"
        )
    if report.not_judged:
        console.print(
            f"[bold red]NOT JUDGED[/] (the trusted side failed twice: infrastructure): "
            f"{report.not_judged} — the rates do not stand until every one is judged"
        )
    console.print(
        f"equivalents: {len(report.equivalents)} judged of {report.equivalents_generated} · "
        f"false rejections {report.false_rejections} ({_rate(report.false_reject_rate)})"
    )
    if report.excluded:
        console.print(f"[yellow]left out (--exclude)[/]: {escape('; '.join(report.excluded))}")
    if report.oracle_note:
        console.print(f"oracle: {escape(report.oracle_note)}")
    if report.weak_inputs:
        console.print(f"[yellow]warning:[/] {escape(report.weak_inputs)}")
    for m in report.mutants:
        if m.outcome == "not_judged":
            console.print(
                f"[bold red]NOT JUDGED[/]: {m.operator} line {m.line}: "
                f"{escape('; '.join(m.reasons[:1]))}"
            )
        elif m.outcome == "survived":
            head = (
                f"[bold red]SURVIVOR[/] ({TASK_FINDING})"
                if m.task_finding
                else "[bold red]SURVIVOR — a gate gap[/]"
            )
            console.print(f"{head}: {m.operator} line {m.line}: {escape(m.description)}")
            if m.oracle:
                console.print(f"  oracle: {escape(m.oracle)}")
            console.print(escape(m.diff), markup=True, highlight=False)
    for e in report.equivalents:
        if not e.judged:
            console.print(
                f"[bold red]NOT JUDGED[/]: {e.operator} ({escape(e.description)}): "
                f"{escape('; '.join(e.reasons[:1]))}"
            )
        elif not e.accepted:
            console.print(
                f"[bold red]FALSE REJECTION[/]: {e.operator} ({escape(e.description)}) → "
                f"{e.category}: {escape('; '.join(e.reasons[:2]))}"
            )
            console.print(escape(e.diff), highlight=False)
    verdict = "[bold green]PASS[/]" if ok else "[bold red]FAIL[/]"
    console.print(
        f"{verdict}: kill rate {_rate(report.kill_rate)} (min {_rate(min_kill)}), "
        f"false rejections {_rate(report.false_reject_rate)} (max {_rate(max_fr)})"
        + (f", {report.not_judged} not judged" if report.not_judged else "")
    )
