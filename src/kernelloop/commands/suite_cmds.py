"""`kernelloop suite TASK…`: many tasks, each its own loop, over one executor, and a
leaderboard (issue #17).

The tasks run one after another; each task's rounds use every slot of the executor (one
candidate per GPU at once). Not several task loops at once: each loop profiles its new
best on the driver's GPU outside the executor, which would land on a GPU another task is
timing on. State lives in OUT/suite.json, written after every task: run the same command
again and finished tasks are skipped, an interrupted one continues (`run --resume`).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kernelloop.commands import interrupt
from kernelloop.commands.executor_opts import (
    ExecutorOpt,
    GpusOpt,
    JobsOpt,
    RayAddressOpt,
    make_executor,
)
from kernelloop.errors import KernelloopError
from kernelloop.task import Task, load_task


def register(app: typer.Typer) -> None:
    app.command("suite")(suite_cmd)


def kernelbench_tasks(folder: Path, level: int | None, out: Path) -> list[Path]:
    """Task folders for a KernelBench tree: folders that hold a task.toml as they are; raw
    problem files (level*/N_Name.py) imported first into OUT/tasks (`kernelloop import
    kernelbench`), once — a resumed suite reuses what it imported."""
    from kernelloop.task.kernelbench import import_problem, problem_files, task_name

    root = folder / f"level{level}" if level is not None else folder
    if not root.is_dir():
        raise KernelloopError(f"{root} is not a folder; pass the KernelBench folder (and --level).")
    tasks = sorted(p.parent for p in root.rglob("task.toml"))
    if tasks:
        return tasks
    dest = out / "tasks"
    made = []
    for path in problem_files(root):
        done = dest / task_name(path)
        made.append(
            done if (done / "task.toml").exists() else import_problem(path, dest, ["float32"])
        )
    return made


def suite_cmd(
    tasks: Annotated[list[Path] | None, typer.Argument(metavar="TASK", help="task folders")] = None,
    kernelbench: Annotated[
        Path | None,
        typer.Option(
            help="a KernelBench folder: its problem files (imported into OUT/tasks) or task "
            "folders already imported"
        ),
    ] = None,
    level: Annotated[
        int | None, typer.Option(min=1, max=4, help="with --kernelbench: levelN only")
    ] = None,
    out: Annotated[Path, typer.Option(help="leaderboard and suite state")] = Path("suite-out"),
    agent: Annotated[
        str,
        typer.Option(
            help="tuner | scripted:DIR | openai:M | anthropic:M; with scripted:DIR, a folder "
            "DIR/<task name>/ is that task's own candidates"
        ),
    ] = "tuner",
    rounds: Annotated[int | None, typer.Option(min=1, help="rounds per task")] = None,
    candidates: Annotated[int | None, typer.Option(min=1, max=64)] = None,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    shapes: Annotated[str | None, typer.Option(help="cpu | gpu | all | labels")] = None,
    dtypes: Annotated[str | None, typer.Option(help="comma-separated dtypes")] = None,
    sandbox: Annotated[str, typer.Option(help="auto | bwrap | none")] = "auto",
    compiled: Annotated[
        bool | None,
        typer.Option(
            "--compiled/--no-compiled",
            help="time the reference under torch.compile beside every candidate, for the "
            "leaderboard's speedup over torch.compile (default: on a GPU)",
        ),
    ] = None,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile/--no-profile",
            help="profile each task's new best under Nsight Compute; --no-profile saves "
            "two profiles a task where the board is all that is wanted",
        ),
    ] = True,
    executor: ExecutorOpt = "local",
    gpus: GpusOpt = None,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """Optimize many tasks, each its own loop, and write OUT/leaderboard.md and .json.
    Exit 0 when every task has ended (the leaderboard says how), 2 usage or setup error,
    130 interrupted (Ctrl-C: the task's run recorded as interrupted, the command that
    resumes the suite printed)."""
    folders = list(tasks or []) + (
        kernelbench_tasks(kernelbench, level, out) if kernelbench else []
    )
    if not folders:
        raise KernelloopError("no tasks given; pass task folders or --kernelbench DIR.")
    loaded = [load_task(f) for f in folders]
    if len({t.name for t in loaded}) != len(loaded):
        raise KernelloopError("two tasks share a name; give each task folder a distinct name.")
    # Imported once the arguments are checked (torch comes with them): a usage error in
    # ~1 s rather than 4 s (issue 36).
    from kernelloop.evaluate.trusted.launch import prestart
    from kernelloop.evaluate.trusted.run import resolve_device
    from kernelloop.report.leaderboard import BOARD, STATE, leaderboard, markdown, task_row

    out.mkdir(parents=True, exist_ok=True)
    state_path = out / STATE
    state: dict = json.loads(state_path.read_text()) if state_path.exists() else {}
    console = Console()
    on = resolve_device(device)
    pool = make_executor(executor, on, gpus, jobs, ray_address)
    interrupt.install()
    current = None  # the task whose loop is running, for a Ctrl-C's record
    settings = dict(agent=agent, rounds=rounds, candidates=candidates, device=device,
                    shapes=shapes, dtypes=dtypes, sandbox=sandbox,
                    compiled=on == "cuda" if compiled is None else compiled,
                    profile=profile)  # fmt: skip
    try:
        with Progress(
            TextColumn("[bold]suite"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
        ) as bar:
            todo = bar.add_task("", total=len(loaded))
            for task in loaded:
                entry = state.get(task.name, {})
                if entry.get("status") == "done":
                    bar.advance(todo)
                    continue
                bar.update(todo, description=task.name)
                resume = _resumable(entry)
                current = task.name
                state[task.name] = {"status": "started", "folder": str(task.folder)}
                state_path.write_text(json.dumps(state, indent=2))
                try:
                    summary = _one(task, settings, pool, console, resume)
                    state[task.name] = {"status": "done", "folder": str(task.folder),
                                        "summary": summary}  # fmt: skip
                except KernelloopError as e:  # this task's failure; the others still run
                    state[task.name] = {"status": "done", "folder": str(task.folder),
                                        "summary": None, "error": str(e)}  # fmt: skip
                state_path.write_text(json.dumps(state, indent=2, default=str))
                current = None
                bar.advance(todo)
    except KeyboardInterrupt as stop:  # Ctrl-C: the loop recorded its run's interruption
        _interrupted(state, state_path, current, stop)
    finally:
        pool.close()
        prestart.stop_all()  # the next evaluation's workers, started for none
    rows = [
        task_row(
            t.name, state[t.name].get("summary"), state[t.name].get("error", ""), str(t.folder)
        )
        for t in loaded
    ]
    board = leaderboard(rows)
    (out / BOARD).write_text(json.dumps(board, indent=2))
    (out / "leaderboard.md").write_text(markdown(board))
    console.print(markdown(board), markup=False)
    Console(stderr=True, soft_wrap=True).print(
        f"leaderboard: {out / 'leaderboard.md'}", markup=False
    )


def agent_for_task(spec: str, name: str) -> str:
    """The agent spec for task `name`: `scripted:DIR/<name>` where DIR holds a folder of
    that name (one folder of solutions per task, e.g. benchmarks/kernelbench_solutions), else
    `spec` as given (a flat DIR replays the same files to every task). A DIR of task
    folders without one for `name` is that task's error, not a silent replay of nothing."""
    kind, _, arg = spec.partition(":")
    if kind != "scripted" or not arg or not Path(arg).is_dir():
        return spec
    root = Path(arg)
    if (root / name).is_dir():
        return f"scripted:{root / name}"
    if not any(root.glob("*.py")) and any(p.is_dir() for p in root.iterdir()):
        raise KernelloopError(
            f"{root} holds a folder per task but none named {name}; add {root / name}/ with "
            "that task's candidate .py files, or leave the task out."
        )
    return spec


def _resumable(entry: dict) -> bool:
    """Whether a task's earlier loop left a run to continue: killed while started, or
    interrupted once its baseline was recorded (before that, nothing to resume)."""
    if entry.get("status") == "interrupted":
        return entry.get("run_id") is not None
    return entry.get("status") == "started"


def _interrupted(state: dict, path: Path, current: str | None, stop: KeyboardInterrupt) -> NoReturn:
    """Write the Ctrl-C into suite.json against the task it stopped, say so and print the
    command that continues the suite (the same one); exit 130."""
    run_id, at = getattr(stop, "run_id", None), getattr(stop, "round", None)
    if current is not None:
        state[current].update(status="interrupted", run_id=run_id, round=at)
        path.write_text(json.dumps(state, indent=2, default=str))
    where = (
        "between tasks"
        if current is None
        else f"in task {current}, "
        + (
            f"run {run_id} round {at} (recorded as interrupted)"
            if run_id
            else "before its baseline was recorded (that task starts over)"
        )
    )
    again = [*interrupt.invocation(), *sys.argv[1:]]
    Console(stderr=True, soft_wrap=True).print(
        f"interrupted: the suite stopped {where}; its state is in {path}; continue it with: "
        f"{shlex.join(again)}",
        markup=False,
    )
    raise typer.Exit(interrupt.EXIT_INTERRUPTED)


def _one(task: Task, s: dict, pool, console: Console, resume: bool) -> dict:
    """One task's loop (as `kernelloop run` runs it) on the suite's executor."""
    from kernelloop.agents.registry import default_candidates, make_agent
    from kernelloop.loop import Options, run_loop
    from kernelloop.loop.view import RunView

    spec = agent_for_task(s["agent"], task.name)
    per_round = s["candidates"] or default_candidates(spec, task.spec.rules.candidates, pool.slots)
    the_agent = make_agent(spec, task=task, per_round=per_round)
    opts = Options(
        device=s["device"],
        shapes=s["shapes"],
        rounds=s["rounds"],
        resume=resume,
        sandbox=s["sandbox"],
        dtypes=[d.strip() for d in s["dtypes"].split(",")] if s["dtypes"] else None,
        executor=pool,
        compiled=s["compiled"],
        profile=s.get("profile", True),
    )
    summary = run_loop(task, the_agent, opts, RunView(console, live_enabled=False))
    cost = getattr(the_agent, "cost_summary", None)
    if callable(cost):
        summary["model_cost"] = cost()
    path = task.workspace() / f"run-{summary['run_id']}-summary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, default=str))
    return summary
