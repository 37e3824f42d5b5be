"""What a person sees while a run works: a live table of the round's candidates under a
header with the best's numbers, and the closing tables. A screen only: every number it
shows comes computed (from `objective`, the gate, or the run summary)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kernelloop.loop.state import Best
from kernelloop.task.textbudget import clip

COLUMNS = ("round", "k", "agent", "hypothesis", "state", "note", "stages")
ECHO_EVERY_S = 5.0
# By the outcome's first word (history/models.outcome_word's vocabulary).
COLOURS = {"promoted": "green", "judged": "green", "rejected": "red", "refused": "yellow",
           "not": "magenta", "baseline": "green"}  # fmt: skip


def _best_text(best: Best) -> str:
    """The header's part about the best: speedup, time on the most heavily weighted
    shape, % of floor."""
    text = f" · best {best.objective:.3f}x over baseline"
    if rows := [r for r in best.shapes if r.get("median_ms")]:
        top = max(rows, key=lambda r: r["weight"])
        text += f" · {top['median_ms']:.3f} ms on {top['shape']}"
    if best.pct_of_floor:
        text += f" · {best.pct_of_floor:.1f}% of floor"
    return text


@dataclass
class RunView:
    console: Console = field(default_factory=Console)
    live_enabled: bool = True
    rows: list[tuple] = field(default_factory=list)
    header: str = ""
    _status: str = ""
    _live: Live | None = None
    echo_status: bool = True
    _echoed: float = -1e9
    _prefix: str = ""
    # Evaluations report progress from the executor's threads while the round's thread
    # adds rows: one lock around every change and redraw.
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def _render(self) -> Group:
        table = _table(self.rows[-14:], self.console.width)
        return Group(Text(self.header, style="bold"), table, Text(self._status, style="dim"))

    def _refresh(self) -> None:
        with self._lock:
            if self._live is not None:
                self._live.update(self._render())

    def start(self, task, agent_name: str, device: str, best: Best | None) -> None:
        """Show the header now; `best` None: not known yet (the baseline round, or a
        resumed run's best being restored), given later by `set_best`."""
        self._prefix = f"{task.name} · agent {agent_name} · {device}"
        self.header = self._prefix + (_best_text(best) if best is not None else "")
        if self.live_enabled and self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4)
            self._live.start()
        else:
            self.console.print(self.header, markup=False, highlight=False)

    def set_best(self, best: Best) -> None:
        with self._lock:
            self.header = self._prefix + _best_text(best)
            self._refresh()

    def status(self, message: str) -> None:
        with self._lock:
            self._status = message
            self._refresh()
            # Without a live display (output to a file or pipe), status lines are printed,
            # at most one per ECHO_EVERY_S, so a long stage still shows it is alive.
            now = time.monotonic()
            if self._live is None and self.echo_status and now - self._echoed >= ECHO_EVERY_S:
                self._echoed = now
                self.console.print(f"  … {message}", markup=False, highlight=False)

    def close(self) -> None:
        """Stop the live display (idempotent): the run ended, failed or was interrupted."""
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None

    def candidate(self, r: int, k: int, prop, state: str, note: str, stages: str = "") -> None:
        """A candidate's row: its state, the verdict's note, and once judged each stage's
        time (`static 0.0 s · … · full 3.5 s · timing 7.9 s`)."""
        colour = COLOURS.get(state.split(" ")[0].rstrip(","), "cyan")
        # The Direction line (else the hypothesis), cut at a word with a mark, and every
        # text escaped: rich would eat "[x^2]" in "E[x^2]-E[x]^2" as markup.
        title = prop.direction.strip() or prop.hypothesis.strip()
        hyp, state_cell = escape(clip(title, 70)), f"[{colour}]{escape(state)}[/]"
        row = (str(r), str(k), escape(prop.agent or "-"), hyp, state_cell,
               escape(clip(note, 90)), stages)  # fmt: skip
        with self._lock:  # a candidate's row is replaced where it is (verdicts come in any order)
            at = next((i for i, old in enumerate(self.rows) if old[:2] == row[:2]), None)
            if at is None:
                self.rows.append(row)
            else:
                self.rows[at] = row
        if self._live is None and state != "evaluating":
            tail = f" [{stages}]" if stages else ""
            self.console.print(
                f"round {r}.{k} {state}: {clip(title, 80)} — {clip(note, 120)}{tail}",
                markup=False,
                highlight=False,
            )
        self._refresh()

    def round_done(self, r: int, best: Best, gain: float) -> None:
        self.set_best(best)
        self.status(f"round {r} done, gain {gain:.2%}")

    def finish(self, summary: dict) -> None:
        """The closing lines: every candidate this view saw, the best per shape, how the
        run ended (all from the run summary)."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        title = f"{summary['task']}: {summary['status']}"
        table = _table(self.rows, self.console.width)
        if isinstance(table, Table) and self.rows:
            table.title = title
        else:
            self.console.print(title, style="bold", markup=False, highlight=False)
        if self.rows:  # none: no candidate, or each already printed (external.ProgressView)
            self.console.print(table)
        if summary.get("best_per_shape"):
            self.console.print(_shape_table(summary["best_per_shape"], self.console.width < WIDE))
        self.console.print(
            f"[bold]{escape(str(summary['status']))}[/]: {escape(str(summary['reason']))}"
        )
        pct = summary.get("best_pct_of_floor")
        floor = f", {pct:.1f}% of floor" if pct else ""
        tried = summary.get("attempts")
        if tried is not None and all(a.get("objective_vs_baseline") is None for a in tried):
            # nothing timed (the interpreter): the baseline's definitional 1.0x is no number
            self.console.print(
                f"best: the baseline (proposal {summary['best_proposal_id']}); no proposal "
                f"was timed · {summary['wall_s']:.0f} s"
            )
            return
        self.console.print(
            f"best: proposal {summary['best_proposal_id']}, "
            f"{summary['best_objective_vs_baseline']:.3f}x over the baseline{floor} · "
            f"{summary['wall_s']:.0f} s"
        )


# Below this many columns the candidates are lines, not a table: at 80 columns seven
# columns left ~13 characters each, and even four cut a note's long token (a static
# screen's "`torch.nn.functional.layer_norm`;" in a 23-character column) mid-word (issue
# 36). A line wraps at spaces over the whole width.
WIDE = 110


def _table(rows: list[tuple], width: int) -> Table | Group:
    if width >= WIDE:
        table = Table(*COLUMNS, expand=True)
        for r in rows:
            table.add_row(*r)
        return table
    return Group(*(_line(r) for r in rows))


def _line(r: tuple) -> Text:
    """One candidate at a narrow width: `r.k state: hypothesis — note` (cells are markup,
    every task or agent text in them escaped by `candidate`)."""
    line = Text.from_markup(f"[bold]{r[0]}.{r[1]}[/] {r[4]}: {r[3]}")
    if r[5]:
        line.append(" — ")
        line.append_text(Text.from_markup(r[5]))
    return line


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _shape_table(rows: list[dict], narrow: bool = False) -> Table:
    # Narrow, the table sheds its outer edge and padding (4 columns): at 80 columns its
    # eight columns' narrowest fit was 81 and rich cut "16384x8192" to "16384x…" (issue 36).
    # The labels never wrap (rich shrinks wrappable columns first; these lost a character
    # to a header that could have wrapped instead).
    t = Table(title="best, per shape", show_edge=not narrow, pad_edge=not narrow)
    t.add_column("shape", no_wrap=True)
    t.add_column("dtype", no_wrap=True)
    for name in ("tag", "best ms", "baseline ms", "speedup", "% of floor", "bound"):
        t.add_column(name)
    for r in rows:
        speedup = r["speedup_vs_baseline"]
        t.add_row(
            r["shape"],
            r["dtype"],
            r["tag"],
            _fmt(r["median_ms"], ".4f"),
            _fmt(r["baseline_ms"], ".4f"),
            _fmt(speedup, ".3f") + ("x" if speedup else ""),
            _fmt(r["pct_of_floor"], ".1f"),
            r.get("bound") or "-",
        )
    return t
