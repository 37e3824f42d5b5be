"""`kernelloop mcp`'s log on stderr (issue 47): each candidate's line is printed once, as
it is judged; the closing lines do not list the candidates a second time."""

from __future__ import annotations

import io

from rich.console import Console

from kernelloop.agents.base import Proposal
from kernelloop.loop.external import ProgressView

SUMMARY = {
    "task": "t",
    "status": "finished",
    "reason": "all rounds done",
    "attempts": [{"objective_vs_baseline": None}],
    "best_proposal_id": 1,
    "wall_s": 3,
}


def test_each_candidate_is_printed_once_at_any_width():
    for width in (80, 140):
        buf = io.StringIO()
        view = ProgressView(console=Console(file=buf, width=width, soft_wrap=True))
        prop = Proposal("", "fuse", direction="fusion of the three kernels")
        view.candidate(1, 1, prop, "correct, not timed", "timings do not count")
        view.finish(SUMMARY)
        text = buf.getvalue()
        assert text.count("fusion of the three kernels") == 1, (width, text)
        assert "finished: all rounds done" in text and "hypothesis" not in text, text
