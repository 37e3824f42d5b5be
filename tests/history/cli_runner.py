"""Runs the `kernelloop` CLI in a subprocess for the tests.

Uses the real entry point (`kernelloop.cli.main`). While a sibling command module listed
in COMMAND_MODULES is still being written, the real CLI cannot import; then this builds
the same app with only the history commands and the same exit-code handling.
"""

from __future__ import annotations

import sys

try:
    from kernelloop.cli import main
except ModuleNotFoundError as e:
    if not (e.name or "").startswith("kernelloop.commands."):
        raise
    import typer
    from rich.console import Console

    from kernelloop.commands import history_cmds
    from kernelloop.errors import KernelloopError

    app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
    history_cmds.register(app)

    def main() -> None:
        try:
            app()
        except KernelloopError as err:
            Console(stderr=True).print(f"[bold red]error:[/] {err}")
            sys.exit(2)


if __name__ == "__main__":
    sys.argv[0] = "kernelloop"
    main()
