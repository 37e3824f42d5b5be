"""`kernelloop mcp`: serve one task to an external coding agent over MCP (stdio)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelloop.task import load_task


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_cmd)


def mcp_cmd(
    task: Annotated[Path, typer.Argument(metavar="TASK", help="task folder (with task.toml)")],
    rounds: Annotated[
        int | None, typer.Option(min=1, help="at most this many rounds (≤ the task's max_rounds)")
    ] = None,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    shapes: Annotated[
        str | None, typer.Option(help="cpu | gpu | all | labels (default: the device's shapes)")
    ] = None,
    dtypes: Annotated[
        str | None, typer.Option(help="comma-separated dtypes (default: all)")
    ] = None,
    workspace: Annotated[
        Path | None, typer.Option(help="history/versions folder (default TASK/.kernelloop)")
    ] = None,
    sandbox: Annotated[
        str, typer.Option(help="auto (= bwrap) | bwrap | none (no isolation: see docs/security.md)")
    ] = "auto",
    allow_unsandboxed: Annotated[
        bool,
        typer.Option(
            help="let a best evaluated with --sandbox none be promoted without `kernelloop approve`"
        ),
    ] = False,
) -> None:
    """Serve TASK over MCP on stdio: an external agent reads the task, history and profile and
    submits candidates through the same gate, history and versioning as `kernelloop run`."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        from kernelloop.errors import KernelloopError

        raise KernelloopError(
            "the MCP SDK is not installed; install it with `pip install 'mcp>=2.3,<3'`."
        ) from None
    from kernelloop.loop.mcp_server import serve

    the_task = load_task(task)  # a wrong path fails here, before the protocol starts

    def session():
        # Imported beside the server (torch and the judge take seconds): see LazySession.
        from kernelloop.loop.session import ExternalSession
        from kernelloop.loop.state import Options

        opts = Options(
            device=device,
            shapes=shapes,
            rounds=rounds,
            workspace=workspace,
            sandbox=sandbox,
            allow_unsandboxed=allow_unsandboxed,
            dtypes=[d.strip() for d in dtypes.split(",")] if dtypes else None,
        )
        return ExternalSession(the_task, opts)

    serve(session)
