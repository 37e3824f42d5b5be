"""Model latency overlapped with judging (`kernelloop run --overlap`): while round r is
judged, a model agent is already asked for round r+1's proposals, from the context it
had before round r's results. A model call (tens of seconds) and a round's judging
(a minute or more on the H200 with profiles) then take the time of the longer one, not
their sum (benchmarks/results/overlap.md measures it).

What the model could not see is said in its context (`AgentContext.unseen_note`): which
candidates were being judged (their directions, so it proposes something else) and that
their results come one round late. Its proposals name as their parent the best it saw
(`Proposal.parent`), so edit points are counted against the source it edited; the gate
compares them with the best of their round, which may be newer.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor

from kernelloop.agents.base import Agent, AgentContext, Proposal
from kernelloop.task.textbudget import clip


def overlaps(agent: Agent) -> bool:
    """Only a model agent has latency worth hiding (the tuner and a script answer at once)."""
    return hasattr(agent, "ledger")


def ahead_note(judged_round: int, judged: list[Proposal]) -> str:
    names = "; ".join(f"{judged_round}.{k} {clip(p.direction or p.hypothesis, 80)}"
                      for k, p in enumerate(judged, start=1))  # fmt: skip
    return (
        f"Not in this context yet: round {judged_round}'s {len(judged)} candidate(s) are "
        f"being judged while you answer ({names}). Their outcomes, and any new best they "
        "make, reach you next round; propose ideas other than theirs. Edit points count "
        "against the best shown here."
    )


class Ahead:
    """The agent's next proposals, requested in a thread of their own."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kernelloop-ahead")
        self._pending: tuple[int, str, Future[list[Proposal]]] | None = None
        self.requested: list[int] = []  # rounds asked for ahead, for the model-call record

    def request(self, ctx: AgentContext, judged: list[Proposal], judged_round: int) -> None:
        ctx = dataclasses.replace(ctx, unseen_note=ahead_note(judged_round, judged))
        self._pending = (ctx.round_index, ctx.best_id, self._pool.submit(self.agent.propose, ctx))
        self.requested.append(ctx.round_index)

    def take(self, r: int) -> list[Proposal] | None:
        """Round r's proposals if they were asked for ahead (waiting for the model if it is
        still answering), each naming the best it saw as its parent; None otherwise."""
        if self._pending is None or self._pending[0] != r:
            return None
        _, best_id, future = self._pending
        self._pending = None
        return [p if p.parent else dataclasses.replace(p, parent=best_id) for p in future.result()]

    def close(self, wait: bool = True) -> None:
        """Wait for a request in flight (its model call is paid for and recorded), or with
        `wait` False (an interrupt) let it finish on its own."""
        if self._pending is not None and wait:
            self._pending[2].exception()  # waits; an error there is the next round's, now moot
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
