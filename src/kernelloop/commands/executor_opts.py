"""The options that choose who runs a round's evaluations and where (`kernelloop run`,
`kernelloop suite`): this host's GPUs, this host's CPU, or a Ray cluster."""

from __future__ import annotations

from typing import Annotated

import typer

from kernelloop.errors import KernelloopError
from kernelloop.executor import Executor

WHERE = "Where evaluations run"  # the help panel of these options
ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        rich_help_panel=WHERE,
        help="local (this host: one job per GPU, or --jobs on the CPU) | ray (a Ray cluster, "
        "one actor per GPU; needs the cluster extra)",
    ),
]
GpusOpt = Annotated[
    str | None,
    typer.Option(
        "--gpus",
        rich_help_panel=WHERE,
        help="GPUs to judge on, e.g. 0,1 (default: every visible GPU)",
    ),
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        rich_help_panel=WHERE,
        min=1,
        max=64,
        help="on the CPU: evaluations at once (default 1); with "
        "--executor ray: CPU actors, or GPU actors (default: every GPU of the cluster)",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        rich_help_panel=WHERE,
        help="auto | HOST:PORT of a running Ray cluster (default: a local Ray instance)",
    ),
]


def make_executor(
    kind: str,
    device: str,
    gpus: str | None = None,
    jobs: int | None = None,
    ray_address: str | None = None,
) -> Executor:
    """The executor the options name, on `device` as resolved (cuda | cpu)."""
    if kind == "local":
        if ray_address:
            raise KernelloopError("--ray-address needs --executor ray; add it or drop the address.")
        from kernelloop.executor.local import local_executor

        return local_executor(device, gpus, jobs)
    if kind == "ray":
        if gpus:
            raise KernelloopError(
                "--gpus is for --executor local; Ray gives each actor its own GPU (use --jobs "
                "for fewer actors than GPUs)."
            )
        from kernelloop.executor.cluster import RayActors

        return RayActors(device, address=ray_address, actors=jobs)
    raise KernelloopError(f"unknown executor {kind!r}; use --executor local or --executor ray.")
