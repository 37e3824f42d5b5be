"""The `kernelloop` command line.

Exit codes: 0 accepted/success, 1 rejected, 2 usage/setup error, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console
from rich.markup import escape

from kernelloop.commands import COMMAND_MODULES
from kernelloop.errors import KernelloopError

app = typer.Typer(
    name="kernelloop",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
err_console = Console(stderr=True, soft_wrap=True)


def _flags_without_a_value() -> None:
    """Typer 0.2x's help shows a flag as `--json <bool>`, as if it took a value: show a
    flag bare, as every other CLI does (issue 36). A no-op where typer lacks the hook."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None:
        return

    def display_type_rich(self, ctx):  # noqa: ANN001, ANN202 - typer's own signature
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich


_flags_without_a_value()

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"kernelloop {version('kernelloop')}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Closed-loop GPU kernel optimization behind a verification gate built to resist being
    fooled (known gaps: docs/security.md). Exit codes: 0 success (accepted), 1 rejected,
    2 usage or setup error, 130 interrupted."""


def main() -> None:
    from kernelloop.sandbox.trusted_env import confine

    confine()  # task code never runs with the model keys (docs/security.md); see launch.py
    try:
        app()
    except KernelloopError as e:
        # Messages carry task text (file names, TOML tables like [tolerances]): never markup.
        err_console.print(f"[bold red]error:[/] {escape(str(e))}")
        sys.exit(2)


if __name__ == "__main__":
    main()
