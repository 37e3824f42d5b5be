"""The external agent of `kernelloop mcp` as the round sees it (it proposes through
`submit_candidate`, and is told each outcome), and the view that prints the run's log to
stderr (stdout carries the MCP protocol) and hands each status line to the caller."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console

from kernelloop.agents.base import Proposal
from kernelloop.loop.view import RunView

AGENT_NAME = "external"


@dataclass
class ExternalAgent:
    """The external agent as the round sees it: it proposes through `submit`, and the
    round tells it each outcome (kept for the reply)."""

    name: str = AGENT_NAME
    last_outcome: str = ""
    candidate_profiles: bool = True  # each outcome carries the candidate's compile facts

    def propose(self, context) -> list[Proposal]:  # the external agent proposes through submit
        return []

    def observe(self, proposal: Proposal, outcome: str) -> None:
        self.last_outcome = outcome


@dataclass
class ProgressView(RunView):
    """The loop's view, printing to stderr (stdout carries the MCP protocol), with each
    status line also handed to the caller of the operation in progress."""

    console: Console = field(default_factory=lambda: Console(file=sys.stderr, soft_wrap=True))
    live_enabled: bool = False
    on_status: Callable[[str], None] | None = None

    def status(self, message: str) -> None:
        super().status(message)
        if self.on_status is not None:
            self.on_status(message)

    def finish(self, summary: dict) -> None:
        """The closing lines without the candidates again: each one's line was printed
        as it was judged (there is no live display on stderr), and the client got each
        verdict (issue 47: the closing table printed every candidate a second time)."""
        rows, self.rows = self.rows, []
        try:
            super().finish(summary)
        finally:
            self.rows = rows
