"""`kernelloop run`: the closed loop on one task."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from kernelloop.commands import interrupt
from kernelloop.commands.executor_opts import (
    ExecutorOpt,
    GpusOpt,
    JobsOpt,
    RayAddressOpt,
    make_executor,
)
from kernelloop.task import Task, load_task

if TYPE_CHECKING:
    from kernelloop.loop.driver import RunInterrupted


# `run --help` in groups (issue 47: 21 options in one panel, 137 lines at 80 columns).
AGENT = "Who proposes"
ROUNDS = "Rounds"
JUDGED = "What is judged"
FILES = "History, files and the sandbox"


def register(app: typer.Typer) -> None:
    app.command("run")(run_cmd)


def run_cmd(
    task: Annotated[Path, typer.Argument(metavar="TASK", help="task folder (with task.toml)")],
    agent: Annotated[
        str,
        typer.Option(
            rich_help_panel=AGENT, help="tuner | scripted:DIR | openai:MODEL | anthropic:MODEL"
        ),
    ] = "tuner",
    screen_model: Annotated[
        str | None,
        typer.Option(rich_help_panel=AGENT, help="cheap model that lists directions and drafts"),
    ] = None,
    final_model: Annotated[
        str | None,
        typer.Option(rich_help_panel=AGENT, help="strong model for the hardest 2–3 directions"),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            rich_help_panel=AGENT,
            help="OpenAI-compatible endpoint (vLLM, SGLang, llama.cpp, Ollama)",
        ),
    ] = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            min=1, rich_help_panel=ROUNDS, help="at most this many rounds (≤ the task's max_rounds)"
        ),
    ] = None,
    candidates: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=64,
            rich_help_panel=ROUNDS,
            help="proposals per round, all judged in the round (default: the task's "
            "rules.candidates, else 2 for model agents and the tuner, 1 for scripted)",
        ),
    ] = None,
    device: Annotated[str, typer.Option(rich_help_panel=JUDGED, help="auto | cuda | cpu")] = "auto",
    shapes: Annotated[
        str | None,
        typer.Option(
            rich_help_panel=JUDGED, help="cpu | gpu | all | labels (default: the device's shapes)"
        ),
    ] = None,
    dtypes: Annotated[
        str | None,
        typer.Option(rich_help_panel=JUDGED, help="comma-separated dtypes (default: all)"),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", rich_help_panel=ROUNDS, help="continue the last unfinished run of this task"
        ),
    ] = False,
    workspace: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel=FILES, help="history/versions folder (default TASK/.kernelloop)"
        ),
    ] = None,
    sandbox: Annotated[
        str,
        typer.Option(
            rich_help_panel=FILES,
            help="auto (= bwrap) | bwrap | none (no isolation: see docs/security.md)",
        ),
    ] = "auto",
    allow_unsandboxed: Annotated[
        bool,
        typer.Option(
            rich_help_panel=FILES,
            help="let a best evaluated with --sandbox none be promoted without "
            "`kernelloop approve`",
        ),
    ] = False,
    summary_json: Annotated[
        Path | None, typer.Option(rich_help_panel=FILES, help="also write the run summary here")
    ] = None,
    compiled: Annotated[
        bool,
        typer.Option(
            "--compiled",
            rich_help_panel=JUDGED,
            help="every benchmark also times the reference under torch.compile (the "
            "summary's speedup over torch.compile; never the gate's)",
        ),
    ] = False,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile/--no-profile",
            rich_help_panel=JUDGED,
            help="profile each new best under Nsight Compute for the agent and the report; "
            "--no-profile: compile facts only (a scripted agent reads no profile)",
        ),
    ] = True,
    overlap: Annotated[
        bool,
        typer.Option(
            "--overlap",
            rich_help_panel=AGENT,
            help="with a model agent, ask for the next round's proposals while this round "
            "is judged (docs/loop.md, 'Overlap')",
        ),
    ] = False,
    executor: ExecutorOpt = "local",
    gpus: GpusOpt = None,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """Run the optimization loop: propose, check, evaluate, gate, record, repeat.
    Exit 0 when the run ends (its summary says what it found), 2 usage or setup error,
    130 interrupted (Ctrl-C; the command that resumes it is printed)."""
    from kernelloop.agents.registry import default_candidates, make_agent
    from kernelloop.evaluate.trusted.launch import prestart
    from kernelloop.evaluate.trusted.run import resolve_device
    from kernelloop.loop import Options, run_loop
    from kernelloop.loop.driver import RunInterrupted
    from kernelloop.loop.view import RunView
    from kernelloop.task.inputs_check import check_inputs_apart

    t = load_task(task)
    check_inputs_apart(t)
    pool = make_executor(executor, resolve_device(device), gpus, jobs, ray_address)
    interrupt.install()
    try:
        per_round = candidates or default_candidates(agent, t.spec.rules.candidates, pool.slots)
        the_agent = make_agent(
            agent,
            task=t,
            screen_model=screen_model,
            final_model=final_model,
            base_url=base_url,
            per_round=per_round,
        )
        if callable(getattr(the_agent, "avoid", None)):  # the tuner reads the history first
            the_agent.avoid(*known_to_history(t, workspace, resolve_device(device)))
        opts = Options(
            device=device,
            shapes=shapes,
            rounds=rounds,
            resume=resume,
            workspace=workspace,
            sandbox=sandbox,
            allow_unsandboxed=allow_unsandboxed,
            dtypes=[d.strip() for d in dtypes.split(",")] if dtypes else None,
            executor=pool,
            compiled=compiled,
            profile=profile,
            overlap=overlap,
        )
        try:
            summary = run_loop(t, the_agent, opts, RunView(Console()))
        except RunInterrupted as stop:
            _interrupted(stop, resume)
    finally:
        pool.close()
        prestart.stop_all()  # the next evaluation's workers, started for none
    cost = getattr(the_agent, "cost_summary", None)
    if callable(cost):
        summary["model_cost"] = cost()
    out = t.workspace(workspace) / f"run-{summary['run_id']}-summary.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(summary, indent=2, default=str)
    out.write_text(text)
    if summary_json:
        summary_json.write_text(text)
    err = Console(stderr=True, soft_wrap=True)  # paths stay on one line, to be copied
    err.print(f"run summary: {out}", markup=False)
    hint = [*interrupt.invocation(), "report", str(task)] + (
        ["--workspace", str(workspace)] if workspace else []
    )
    err.print(f"reviewer's report: {shlex.join(hint)}", markup=False)


def _interrupted(stop: RunInterrupted, resumed: bool) -> NoReturn:
    """Say what a Ctrl-C left and the exact command that continues it; exit 130."""
    err = Console(stderr=True, soft_wrap=True)
    if not stop.run_id:
        err.print(
            "interrupted in round 0, before the baseline was recorded: nothing to resume; "
            "run the same command again to start over.",
            markup=False,
        )
    else:
        again = [*interrupt.invocation(), *sys.argv[1:]] + ([] if resumed else ["--resume"])
        err.print(
            f"interrupted: run {stop.run_id} stopped in round {stop.round}, recorded as "
            f"interrupted; continue it with: {shlex.join(again)}",
            markup=False,
        )
    raise typer.Exit(interrupt.EXIT_INTERRUPTED)


def known_to_history(task: Task, workspace: Path | None, device: str):
    """(why the loop would refuse a source as a duplicate of one the task's history judged,
    the coming run's number): what the tuner reads before proposing, so a second run of
    the same job spends no round on a refusal (issue 47). The history is read afresh on
    each question (the loop writes it between rounds); no history yet: nothing is known."""
    from kernelloop.evaluate.trusted.run import timings_count
    from kernelloop.history import HistoryStore
    from kernelloop.history.workspace import DB_NAME

    db = task.workspace(workspace) / DB_NAME
    measured = timings_count(device, False, task.spec.task.language)

    def known(source: str, hypothesis: str, parent_id: str) -> str | None:
        if not db.is_file():
            return None
        with HistoryStore.open(db) as store:
            found = store.check_duplicate(
                task.name, source, hypothesis, int(parent_id), measured=measured
            )
        return found.message if found else None

    runs = 0
    if db.is_file():
        with HistoryStore.open(db) as store:
            runs = len(store.runs(task.name))
    return known, runs + 1
