"""The `kernelloop` command line.

Exit codes: 0 success (judged correct, promoted or passed), 1 rejected, 2 usage or setup
error, 130 interrupted (Ctrl-C).
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


def _help_at_80_columns() -> None:
    """Typer lays an options panel out as six columns (name, short name, `--no-` name, its
    short name, type, help) sized alike: at 80 columns `run --help` was 137 lines with flag
    names cut (`--allow-unsandbo…`) and one word a line of help (issue 47). Here a flag's
    names share one column, never cut (a `--no-` form on the line below), the short names
    one more, and the help takes the rest, its type or range ("<int range> [x>=1]") at its
    end ("<str>", which says nothing, left out). A no-op where typer lacks the hook."""
    from rich.columns import Columns
    from rich.table import Table
    from rich.text import Text
    from typer import rich_utils

    if getattr(rich_utils, "Table", None) is not Table:
        return

    class OptionsTable(Table):
        def add_row(self, *cells, **kw) -> None:  # noqa: ANN003 - rich's own signature
            if len(cells) not in (6, 7):  # not an options panel's row: as typer drew it
                return super().add_row(*cells, **kw)
            required = cells[:-6]
            long, short, no_long, no_short, types, help_ = cells[-6:]
            names = Text("\n").join(t for t in (long, no_long) if t.plain)
            shorts = Text("\n").join(t for t in (short, no_short) if t.plain)
            kind = " ".join(types.plain.split())
            if kind and kind != "<str>" and isinstance(help_, Columns):
                help_.renderables.append(Text(kind, style="dim"))
            super().add_row(*required, names, shorts, help_, **kw)
            for column in self.columns[:-1]:
                column.no_wrap = True
            self.columns[-1].ratio = 1

    rich_utils.Table = OptionsTable


_help_at_80_columns()

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
    fooled (known gaps: docs/security.md). Exit codes: 0 success (judged correct), 1
    rejected, 2 usage or setup error, 130 interrupted."""


def main() -> None:
    from kernelloop.sandbox.trusted_env import confine

    confine()  # task code never runs with the model keys (docs/security.md); see launch.py
    try:
        app()
    except SystemExit as e:
        from kernelloop.commands import interrupt
        from kernelloop.sandbox import stopping

        if e.code == interrupt.EXIT_INTERRUPTED and stopping.STOPPING.is_set():
            interrupt.exit_interrupted()
        raise
    except KernelloopError as e:
        # Messages carry task text (file names, TOML tables like [tolerances]): never markup.
        err_console.print(f"[bold red]error:[/] {escape(str(e))}")
        sys.exit(2)


if __name__ == "__main__":
    main()
