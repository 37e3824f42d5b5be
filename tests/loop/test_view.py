"""The live view at 80 columns (issue 36: words cut mid-way): the table drops to four
columns, and hypothesis and note are clipped at word boundaries."""

from __future__ import annotations

import re
from types import SimpleNamespace

from rich.console import Console

from kernelloop.loop.view import RunView

HYP = "tuner sweep: BLOCK_COLS=2048 NUM_WARPS=8 (fewer programs per row, wider loads) [x]"
NOTE = (
    "correct, but timings on this device do not count (interpreter): a speedup can only "
    "be accepted from GPU measurements"
)


def _words(text: str) -> set[str]:
    return set(text.split())


def test_no_word_is_cut_at_80_columns():
    console = Console(width=80, record=True, force_terminal=True)
    view = RunView(console=console, live_enabled=False)
    view.start(SimpleNamespace(name="t"), "tuner", "cpu", None)
    prop = SimpleNamespace(hypothesis=HYP, direction="", agent="tuner")
    view.candidate(1, 1, prop, "rejected", NOTE, "static 0.0 s · full 88.2 s")
    with console.capture() as cap:
        console.print(view._render())
    text = cap.get()
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    cells = [c.strip() for line in text.splitlines() for c in line.split("│")[1:-1]]
    tokens = {t for c in cells for t in c.split()}
    allowed = _words(HYP) | _words(NOTE) | {"1.1", "rejected"}
    for t in tokens:
        assert t.rstrip("…") in allowed or t.rstrip("…") + "," in allowed, (t, text)
    assert "r.k" in text and "BLOCK_COLS=2048" in text and "[x]" not in text  # clipped
