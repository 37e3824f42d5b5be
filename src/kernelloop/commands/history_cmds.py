"""`kernelloop history | rollback | export | approve`: reading and acting on a task's history."""

from __future__ import annotations

import getpass
import json
import re
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelloop.commands.common import TaskArg, WorkspaceOpt, open_history
from kernelloop.errors import KernelloopError
from kernelloop.history import HistoryStore
from kernelloop.history.export_text import benchmark_markdown, export_message
from kernelloop.history.models import Attempt, clip, history_row
from kernelloop.versions import Versions


def _shape_text(a: Attempt) -> str:
    """Every shape's change, the largest first, one a line (four shapes once showed three,
    the fourth dropped without a word)."""
    if not a.measured:
        return "–"
    changes = sorted(a.shape_changes().items(), key=lambda kv: abs(kv[1] - 1), reverse=True)
    return "\n".join(f"{s} {(r - 1) * 100:+.1f}%" for s, r in changes)


# The verdict's longest word ("promoted," "[correctness]"): its column is never narrower,
# so a verdict wraps at its spaces and is never cut ("accept… ★").
VERDICT_MIN = 14


def _table(task_name: str, attempts: list[Attempt], width: int) -> Table:
    """The attempts, one row each, a round's candidates together. Every column fits 80
    columns without a cut word: the run column only where several runs are shown (else
    the title names the run), the agent under the idea, the cost only where a model was
    called (the total is printed below either way)."""
    runs = sorted({a.run_id for a in attempts})
    priced = any(a.model or a.cost_usd for a in attempts)
    title = f"kernelloop history: {task_name}" + (f", run {runs[0]}" if len(runs) == 1 else "")
    # Narrower than 120 columns the table drops its vertical rules and padding: one
    # blank column between two columns.
    narrow = width < 120
    thin = {"box": box.SIMPLE_HEAD, "padding": (0, 0), "pad_edge": False} if narrow else {}
    table = Table(title=title, show_lines=False, **thin)
    several = len(runs) > 1
    if narrow:  # id, run and round in one column, one a line
        table.add_column("\n".join(["ID", *(["run"] if several else []), "round"]), no_wrap=True)
    else:
        table.add_column("ID", no_wrap=True)
        if several:
            table.add_column("Run", no_wrap=True)
        table.add_column("Round", no_wrap=True)
    table.add_column("Hypothesis (agent)", overflow="fold", ratio=1, min_width=16)
    table.add_column("Verdict", min_width=VERDICT_MIN)
    table.add_column("Objective", min_width=8)
    table.add_column("Per-shape change", no_wrap=True)
    if priced:
        table.add_column("Cost", no_wrap=True)
    previous = None
    for a in attempts:
        if previous is not None and (a.run_id, a.round) != previous:
            table.add_section()  # a round's candidates stay together, one block per round
        previous = (a.run_id, a.round)
        # The Direction line (else the hypothesis), cut at a word with a mark; every
        # text escaped, so "E[x^2]-E[x]^2" is not eaten as markup.
        hyp = escape(clip(a.title, 160))
        who = "/".join(x for x in (a.agent, a.model) if x)
        hyp += f"\n[dim]({escape(who)})[/]" if who else ""
        if a.status == "refused":
            hyp += f"\n[yellow]{escape(a.refused_reason)}[/]"
        if a.status == "infrastructure":
            hyp += f"\n[magenta]{escape(a.infra_reason)}[/]"
        ids = [str(a.id)] + ([str(a.run_id)] if several else [])
        ids.append("base" if a.round == 0 else f"r{a.round}-{a.k}")
        row = ["\n".join(ids)] if narrow else ids
        row += [hyp, _verdict_cell(a), _objective_cell(a), _shape_text(a)]
        table.add_row(*row, *([_cost(a)] if priced else []))
    return table


def _verdict_cell(a: Attempt) -> str:
    """The outcome in the shared vocabulary (history/models.outcome_word), coloured."""
    word = a.outcome
    colour = {"refused": "yellow", "not evaluated": "magenta", "pending": "dim"}.get(word)
    colour = colour or ("red" if word.startswith("rejected") else "green")
    note = " (not the candidate's fault)" if word == "not evaluated" else ""
    return f"[{colour}]{escape(word)}[/]{note}" + (" ★" if a.was_best else "")


_REQUIRED = re.compile(r"does not beat the required ([0-9.]+)x")


def _objective_cell(a: Attempt) -> str:
    """The objective over the baseline and the change from the parent; where the gate found
    a gain too small to trust (category slower, yet faster than its parent), the gain it
    required beside it, so "+3.0%" next to "rejected [slower]" reads as short of the bar."""
    if a.objective is None:
        return "–"
    if not a.measured:
        return "not timed"
    cell = f"{a.objective:.3f}x"
    if a.gain is None:
        return cell
    change = f"{(a.gain - 1) * 100:+.1f}%"
    bar = next((m for r in a.reasons if (m := _REQUIRED.search(r))), None)
    if a.category == "slower" and a.gain > 1 and bar:
        change += f", needed {(float(bar[1]) - 1) * 100:+.1f}%"
    return f"{cell} ({change})"


def _cost(a: Attempt) -> str:
    """A model's cost; "unpriced" where the model has no price (cost 0), "–" without one."""
    if a.cost_usd:
        return f"${a.cost_usd:.4f}"
    return "unpriced" if a.model else "–"


def history(
    task_dir: TaskArg,
    workspace: WorkspaceOpt = None,
    run: Annotated[int | None, typer.Option("--run", min=1, help="Only this run id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the attempts as JSON.")] = False,
) -> None:
    """Table of attempts: round, hypothesis, verdict, objective, per-shape change, cost."""
    task, store = open_history(task_dir, workspace)
    with store:
        attempts = store.attempts(task.name, run_id=run)
        if as_json:
            typer.echo(json.dumps([history_row(a) for a in attempts], indent=1))
            return
        if not attempts:
            raise KernelloopError(
                f"no attempts recorded for task {task.name}{f' in run {run}' if run else ''}; "
                f"run `kernelloop run {task_dir}` first."
            )
        console = Console()
        table = _table(task.name, attempts, console.width)
        console.print(table)
        best, pending = store.promoted_best(task.name), store.pending_best(task.name)
        if best:
            speed = f"{best.objective or 0:.3f}x" if best.measured else "not timed"
            console.print(f"best: #{best.id} ({speed}), branch kernelloop/{task.name}/best")
        if pending:
            console.print(
                f"[yellow]awaiting approval:[/] #{pending.id}; run `kernelloop approve {task_dir}`"
            )
        total = sum(a.cost_usd for a in attempts)
        unpriced = any(a.model and not a.cost_usd for a in attempts)
        cost = f"${total:.4f}" if total or not unpriced else "unpriced"
        if total and unpriced:
            cost += " (plus unpriced models)"
        console.print(f"model cost: {cost}", markup=False)


def _target(store: HistoryStore, versions: Versions, to: str) -> tuple[str, Attempt | None]:
    """A proposal id, 'best', or any git revision -> (commit, attempt if known)."""
    if to.isdigit():
        attempt = store.attempt(int(to))
        if not attempt.commit_sha:
            raise KernelloopError(
                f"proposal #{to} was never committed (refused or in flight); "
                "pick an id with a commit from `kernelloop history --json`."
            )
        return versions.resolve(attempt.commit_sha), attempt
    return versions.resolve(to), None


def rollback(
    task_dir: TaskArg,
    to: Annotated[
        str,
        typer.Option(
            "--to", help="Proposal id from `kernelloop history`, 'best', or a git revision."
        ),
    ],
    workspace: WorkspaceOpt = None,
    output: Annotated[
        Path | None, typer.Option("--output", help="Write here instead of the task's kernel file.")
    ] = None,
) -> None:
    """Restore a generation's kernel byte for byte and make it the best."""
    task, store = open_history(task_dir, workspace)
    with store:
        versions = Versions.open(task.folder, task.name, task.spec.task.baseline)
        commit, attempt = _target(store, versions, to)
        dest = output or task.baseline_path
        backup = versions.restore(commit, dest)
        if output is None:
            versions.set_best(commit, f"rollback to {to}")
            if attempt is not None:
                store.set_best(None, attempt.id, reason=f"rollback by {getpass.getuser()}")
        label = f"#{attempt.id}" if attempt else to
        typer.echo(f"restored {label} (commit {commit[:12]}) to {dest}")
        if backup:
            typer.echo(f"previous contents saved on {backup.removeprefix('refs/heads/')}")


def export(
    task_dir: TaskArg,
    workspace: WorkspaceOpt = None,
    branch: Annotated[
        str | None, typer.Option("--branch", help="Branch name (default kernelloop/TASK/export).")
    ] = None,
    proposal: Annotated[
        int | None, typer.Option("--id", min=1, help="Export this proposal instead of the best.")
    ] = None,
) -> None:
    """Make a reviewable branch: the best kernel, BENCHMARK.md beside it, the record in the
    message."""
    task, store = open_history(task_dir, workspace)
    with store:
        pending = None if proposal else store.pending_best(task.name)
        if pending:
            raise KernelloopError(
                f"best #{pending.id} awaits sign-off for a new architecture; "
                f"run `kernelloop approve {task_dir}` first (or export another with --id)."
            )
        attempt = store.attempt(proposal) if proposal else store.promoted_best(task.name)
        if attempt is None:
            raise KernelloopError(
                f"task {task.name} has no best yet; run `kernelloop run {task_dir}` first."
            )
        record_json = store.record_json(attempt.id)
        if record_json is None or not attempt.commit_sha:
            raise KernelloopError(
                f"proposal #{attempt.id} has no benchmark record or commit, and there is no "
                "export without a record; export an evaluated id from `kernelloop history`."
            )
        digest = store.runs(task.name)[-1].task_digest if store.runs(task.name) else ""
        stored = dict(
            bench_json=store.bench_json(attempt.id), gate_json=store.gate_json(attempt.id)
        )
        versions = Versions.open(task.folder, task.name, task.spec.task.baseline)
        variant = versions.export(
            versions.resolve(attempt.commit_sha),
            benchmark_markdown(task.name, attempt, record_json, **stored),
            export_message(task.name, digest, attempt, record_json, **stored),
            branch=branch,
        )
        typer.echo(
            f"exported #{attempt.id} to branch {variant.branch.removeprefix('refs/heads/')} "
            f"(commit {variant.commit[:12]}) in {versions.repo}"
        )


def approve(
    task_dir: TaskArg,
    workspace: WorkspaceOpt = None,
    arch: Annotated[
        str | None, typer.Option("--arch", help="Architecture signed off (default: the run's).")
    ] = None,
    proposal: Annotated[
        int | None,
        typer.Option("--id", min=1, help="Approve this proposal (default: the pending best)."),
    ] = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Who approves (default: the OS user).")
    ] = None,
    note: Annotated[str, typer.Option("--note", help="Why, for the record.")] = "",
) -> None:
    """Sign off a best found on an architecture the tool has little history on."""
    task, store = open_history(task_dir, workspace)
    with store:
        attempt = store.attempt(proposal) if proposal else store.pending_best(task.name)
        if attempt is None:
            raise KernelloopError(
                f"nothing awaits approval for task {task.name}; pass --id N to approve a given "
                "attempt."
            )
        run_arch = next((r.arch for r in store.runs(task.name) if r.id == attempt.run_id), "")
        arch_name = arch or run_arch
        if not arch_name:
            raise KernelloopError(
                "the run recorded no architecture; pass --arch, e.g. --arch sm_90."
            )
        store.add_approval(task.name, arch_name, by or getpass.getuser(), attempt.id, note)
        if attempt.commit_sha:
            Versions.open(task.folder, task.name, task.spec.task.baseline).set_best(
                attempt.commit_sha, f"approved #{attempt.id}"
            )
        typer.echo(
            f"approved #{attempt.id} on {arch_name}; it is now the promoted best of {task.name}"
        )


def register(app: typer.Typer) -> None:
    app.command("history")(history)
    app.command("rollback")(rollback)
    app.command("export")(export)
    app.command("approve")(approve)
