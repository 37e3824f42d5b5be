"""Model latency overlapped with judging (issue 35): the next round's proposals are asked
for in a thread while this round is judged, from a context that says which results it
cannot see yet, and they name the best they saw as their parent. The loop-level
measurement is benchmarks/overlap.py (benchmarks/results/overlap_cpu.json)."""

from __future__ import annotations

import threading
import time

from kernelloop.agents.base import AgentContext, Proposal
from kernelloop.loop.overlap import Ahead, overlaps
from tests.loop.test_outcome_words import BASE


class SlowModel:
    name = "llm"
    ledger = object()  # a model agent (overlaps() looks for a cost ledger)

    def __init__(self) -> None:
        self.seen: list[AgentContext] = []
        self.thread = ""

    def propose(self, context: AgentContext) -> list[Proposal]:
        self.thread = threading.current_thread().name
        time.sleep(0.5)
        self.seen.append(context)
        return [Proposal(BASE, "h", direction="d")]


def ctx(r: int) -> AgentContext:
    return AgentContext("t", "", "triton", "forward", BASE, "7", "", "", "", r, 3)


def test_the_next_round_is_asked_while_this_one_is_judged():
    agent = SlowModel()
    assert overlaps(agent) and not overlaps(object())
    ahead = Ahead(agent)
    judged = [Proposal(BASE, "fuse everything", direction="fusion of the three kernels")]
    t0 = time.monotonic()
    ahead.request(ctx(2), judged, 1)
    assert time.monotonic() - t0 < 0.2  # returns at once: judging goes on meanwhile
    assert ahead.take(3) is None  # only the round it was asked for
    [p] = ahead.take(2)
    assert p.parent == "7"  # counted against the best it saw
    assert agent.thread.startswith("kernelloop-ahead")
    note = agent.seen[0].unseen_note
    assert "round 1's 1 candidate(s) are being judged" in note
    assert "1.1 fusion of the three kernels" in note
    assert ahead.take(2) is None
    ahead.close()
    assert ahead.requested == [2]
