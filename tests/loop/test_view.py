"""The live view at 80 columns (issue 36: words cut mid-way): below 110 columns the
round's candidates are lines that wrap at spaces, not a table whose narrow cells fold a
long token; hypothesis and note are clipped at word boundaries, and the closing per-shape
table keeps its labels whole."""

from __future__ import annotations

import re
from types import SimpleNamespace

from rich.console import Console

from kernelloop.loop.state import Best
from kernelloop.loop.view import RunView

HYP = "tuner sweep: BLOCK_COLS=2048 NUM_WARPS=8 (fewer programs per row, wider loads) [x]"
NOTE = (
    "correct, but timings on this device do not count (interpreter): a speedup can only "
    "be accepted from GPU measurements"
)
# A static screen's note, as a real run at 80 columns printed it: its 33-character token
# was cut to "`torch.nn.functional.l…" in the four-column table's note cell.
SCREEN = (
    "static screen: line 9: uses `torch.nn.functional.layer_norm`; a triton candidate may "
    "take from torch only allocation"
)
SHAPES = ("16384x8192", "4096x8000", "7x129")  # the first was cut to "16384x…" at 80
COLOURS = re.compile(r"\x1b\[[0-9;]*m")
BOX = re.compile(r"[\u2500-\u257f]")  # box drawing


def _plain(text: str) -> str:
    return COLOURS.sub("", text)


def _tokens(text: str) -> list[str]:
    return BOX.sub(" ", _plain(text)).split()


def _render_at_80() -> tuple[str, set[str]]:
    console = Console(width=80, record=True, force_terminal=True)
    view = RunView(console=console, live_enabled=False)
    task = SimpleNamespace(name="ln_softmax_dropout")
    with console.capture() as cap:
        view.start(task, "anthropic:claude-sonnet-4-5", "cuda", None)
        view.set_best(Best(1, "", None, 1.167, 41.3, shapes=[{"shape": SHAPES[0],
                      "weight": 0.35, "median_ms": 0.4567}]))  # fmt: skip
        tuner = SimpleNamespace(hypothesis=HYP, direction="", agent="tuner")
        view.candidate(1, 1, tuner, "rejected", NOTE, "static 0.0 s · full 88.2 s")
        lib = SimpleNamespace(hypothesis="library", direction="", agent="scripted")
        view.candidate(2, 1, lib, "rejected [static]", SCREEN, "static 0.0 s (failed)")
        view.status("round 3: evaluating r3_1 (smoke: checked 20/39 calls)")
        console.print(view._render())
        rows = [
            dict(shape=s, dtype="bfloat16", tag="common", median_ms=0.45678, baseline_ms=0.5234,
                 speedup_vs_baseline=1.1456, pct_of_floor=41.3, bound="memory")
            for s in SHAPES
        ]  # fmt: skip
        view.finish(dict(task="ln_softmax_dropout", status="needs review", reason="review it",
                         best_per_shape=rows, best_proposal_id=7, best_objective_vs_baseline=1.167,
                         best_pct_of_floor=41.3, wall_s=321))  # fmt: skip
    said = " ".join(
        [HYP, NOTE, SCREEN, *SHAPES, "ln_softmax_dropout · agent anthropic:claude-sonnet-4-5",
         "cuda best 1.167x over baseline 0.457 ms on 41.3% of floor 1.1 2.1 rejected [static]:",
         "rejected: library round 3: evaluating r3_1 (smoke: checked 20/39 calls) static 0.0 s",
         "full 88.2 s (failed) needs review: review it best, per shape dtype tag best ms",
         "baseline ms speedup bound bfloat16 common 0.4568 0.5234 1.146x 41.3 memory",
         "best: proposal 7, 1.167x over the baseline, 41.3% of floor 321 s — · …",
         "[static 0.0 s] [static 0.0 s (failed)] ln_softmax_dropout: needs review % of floor"]
    )  # fmt: skip
    return cap.get(), set(_tokens(said))


def test_no_word_is_cut_at_80_columns():
    text, words = _render_at_80()
    assert max(len(line) for line in _plain(text).splitlines()) <= 80, text
    for t in _tokens(text):
        # A word whole, or clipped at a word's end with a mark (clip), never a fragment.
        assert t in words or t.rstrip("…") in words or t.rstrip("…") + "," in words, (t, text)
    plain = _plain(text)
    assert "`torch.nn.functional.layer_norm`;" in plain and "16384x8192 " in plain, plain
    assert "BLOCK_COLS=2048" in plain and "[x]" not in plain  # clipped, escaped
    assert "rejected [static]" in plain  # task/agent text shown, not eaten as markup


def test_a_run_that_timed_nothing_names_the_baseline_without_a_speedup():
    console = Console(width=120, record=True)
    view = RunView(console=console, live_enabled=False)
    with console.capture() as cap:
        view.finish(dict(task="level1_19_ReLU", status="finished", reason="nothing timed",
                         best_proposal_id=1, best_objective_vs_baseline=1.0,
                         best_pct_of_floor=None, wall_s=4,
                         attempts=[{"objective_vs_baseline": None}]))  # fmt: skip
    text = _plain(cap.get())
    assert "best: the baseline (proposal 1); no proposal was timed" in text, text
    assert "1.000x" not in text
