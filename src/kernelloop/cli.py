"""The `kernelloop` command line.

Exit codes: 0 accepted/success, 1 rejected, 2 usage/setup error.
"""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console

from kernelloop.commands import COMMAND_MODULES
from kernelloop.errors import KernelloopError

app = typer.Typer(
    name="kernelloop",
    help="Closed-loop GPU kernel optimization behind a verification gate built to resist being "
    "fooled (known gaps: docs/security.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True, soft_wrap=True)

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    from kernelloop.sandbox.trusted_env import confine

    confine()  # task code never runs with the model keys (docs/security.md); see launch.py
    try:
        app()
    except KernelloopError as e:
        err_console.print(f"[bold red]error:[/] {e}")
        sys.exit(2)


if __name__ == "__main__":
    main()
