"""`kernelloop profile`: what the agent sees about a candidate's bottleneck."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from kernelloop.commands.candidate_file import check_candidate_file
from kernelloop.commands.labels import print_rejection
from kernelloop.commands.progress import progress_lines
from kernelloop.profile.render import prompt_text


def register(app: typer.Typer) -> None:
    app.command("profile")(profile_cmd)


def profile_cmd(
    task: Annotated[Path, typer.Argument(metavar="TASK", help="task folder (with task.toml)")],
    candidate: Annotated[
        Path,
        typer.Argument(
            metavar="CANDIDATE", help="candidate .py file defining the task's entry function"
        ),
    ],
    parent: Annotated[
        Path | None, typer.Option(help="the variant this one came from: adds before/after deltas")
    ] = None,
    shape: Annotated[
        str | None,
        typer.Option(help="shape label like 16384x8192 (default: the heaviest GPU shape)"),
    ] = None,
    dtype: Annotated[str | None, typer.Option(help="dtype (default: the task's first)")] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print the summary and full metrics as JSON")
    ] = False,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw", help="with --json: also every raw Nsight Compute row (~50 KB/kernel)"
        ),
    ] = False,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    sandbox: Annotated[
        str, typer.Option(help="auto (= bwrap) | bwrap | none (no isolation: see docs/security.md)")
    ] = "auto",
    timeout: Annotated[
        float, typer.Option(min=1, help="wall-clock limit per profiled file, seconds")
    ] = 300.0,
) -> None:
    """Profile one call of a candidate (Nsight Compute on a GPU; compile facts without one)
    and print the summary.
    A source the static screen refuses is not run: exit 1, labelled as a static-screen rejection."""
    from kernelloop.profile.run import ScreenRefused, profile_candidate
    from kernelloop.task import load_task

    t = load_task(task)
    for path in [candidate, *([parent] if parent else [])]:
        check_candidate_file(path)
    err = Console(stderr=True)
    try:
        with progress_lines(err, "profiling…") as say:
            out = profile_candidate(
                t,
                candidate,
                parent=parent,
                shape=shape,
                dtype=dtype,
                device=device,
                sandbox=sandbox,
                timeout_s=timeout,
                progress=say,
            )
    except ScreenRefused as e:
        findings = [f"{e.path.name}: {f.render()}" for f in e.findings]
        if json_out:
            sys.stdout.write(
                json.dumps(
                    {
                        "task": t.name,
                        "profiled": False,
                        "category": "static",
                        "stage": "static screen",
                        "file": e.role,
                        "findings": findings,
                    },
                    indent=2,
                )
                + "\n"
            )
        else:
            print_rejection(Console(), "static", findings, note=" (not profiled)")
        raise typer.Exit(1) from None
    text = prompt_text(out.report)
    if json_out:
        data = {
            "task": t.name,
            "shape": out.shape,
            "dtype": out.dtype,
            "wall_s": round(out.wall_s, 2),
            "summary": text,
            "profile": out.report.to_record(include_raw=raw),
            "parent_profile": out.parent.to_record(include_raw=raw) if out.parent else None,
            "agent_metrics": out.report.agent_metrics(),
            "kernels": [k.model_dump(mode="json") for k in out.report.kernel_infos()],
        }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        sys.stdout.write(text + "\n")
        err.print(f"[dim]{out.shape} {out.dtype} · {out.wall_s:.1f} s[/]")
