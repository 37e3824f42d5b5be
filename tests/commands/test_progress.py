"""Long commands' progress off a terminal: one timestamped line per new step (a device
script's log says how far a cut run got); on a terminal only the spinner."""

from __future__ import annotations

import io
import re

from rich.console import Console

from kernelloop.commands.progress import progress_lines


def test_off_a_terminal_each_new_step_is_one_timestamped_line_and_repeats_are_dropped():
    buf = io.StringIO()
    err = Console(file=buf, force_terminal=False, width=40)
    with progress_lines(err, "gate-check…") as say:
        say("mutant 1/5 (tail_skipped, line 12): smoke [passed] in 1.2 s")
        say("mutant 1/5 (tail_skipped, line 12): smoke [passed] in 1.2 s")
        say("mutant 2/5 (wrong_axis, line 30)")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3, lines  # no wrapping at 40 columns, the repeat dropped
    assert all(re.match(r"\[ +\d+\.\d s\] ", line) for line in lines), lines
    assert lines[0].endswith("gate-check…")
    assert "smoke [passed] in 1.2 s" in lines[1]  # brackets are text, not markup
    assert lines[2].endswith("mutant 2/5 (wrong_axis, line 30)")


def test_on_a_terminal_the_steps_are_not_printed_as_lines():
    buf = io.StringIO()
    err = Console(file=buf, force_terminal=True, width=80)
    with progress_lines(err, "evaluating…") as say:
        say("full: checked 10/20 calls")
    assert "[    0.0 s]" not in buf.getvalue()
