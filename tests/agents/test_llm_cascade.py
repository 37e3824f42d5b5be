"""The cheap→strong cascade end to end: an OpenAI-compatible screen model in front of an
Anthropic final model, both on loopback servers, both through their real SDKs."""

from __future__ import annotations

import pytest
from llm_loopback import BASE_SOURCE, HISTORY, PROFILE, ModelServer, Reply, context, good_answer

from kernelloop.agents.llm import CascadeAgent, make_llm_agent
from kernelloop.agents.llm.cascade import direction_similarity, merge_directions, source_key
from kernelloop.agents.llm.parse import ParsedCandidate

ENV = {"OPENAI_API_KEY": "sk-screen-secret-111", "ANTHROPIC_API_KEY": "sk-ant-final-secret-222"}


def _src(old: str, new: str) -> str:
    return BASE_SOURCE.replace(old, new)


SCREEN_ANSWER = f"""Here are the directions, most promising first.

### Candidate 1
Direction: more warps per row
Difficulty: 1
Hypothesis: occupancy is register-limited at 23.5%; more warps hide load latency.
Predicted effect: -8% time

```python
{_src("NUM_WARPS = 4", "NUM_WARPS = 8")}```

### Candidate 2
Direction: raise the warp count for each row
Difficulty: 2
Hypothesis: same as above, the kernel is latency bound.

```python
{_src("NUM_WARPS = 4", "NUM_WARPS = 8  # more warps")}```

### Candidate 3
Direction: persistent kernel processing several rows per program
Difficulty: 5
Hypothesis: launch and tail effects dominate small row counts; a persistent grid removes them.

### Candidate 4
Direction: vectorize loads with a larger block
Difficulty: 4
Hypothesis: DRAM throughput is only 41% of peak; wider blocks issue fewer, larger loads.

```diff
@@ -4,2 +4,2 @@
-BLOCK = 1024
+BLOCK = 2048
 NUM_WARPS = 4
```

### Candidate 5
Direction: fewer warps to cut register pressure
Difficulty: 2
Hypothesis: fewer warps leave more registers per thread.

```python
{_src("NUM_WARPS = 4", "NUM_WARPS = 2")}```
"""

PERSISTENT = _src("row = tl.program_id(0)", "row = tl.program_id(0)  # persistent grid-stride")
FINAL_ANSWER = f"""### Candidate 1
Direction: persistent kernel processing several rows per program
Hypothesis: a grid of one program per SM walks the rows, removing the tail wave.
Predicted effect: -15% on the 4096-row shape

```python
{PERSISTENT}```

### Candidate 2
Direction: vectorize loads with a larger block
Hypothesis: 41% of DRAM peak; 2048-wide blocks with 8 warps keep more loads in flight.
Predicted effect: DRAM throughput to ~70% of peak

```python
{_src("BLOCK = 1024", "BLOCK = 2048").replace("NUM_WARPS = 4", "NUM_WARPS = 8")}```
"""


@pytest.fixture
def servers():
    screen, final = ModelServer("openai").start(), ModelServer("anthropic").start()
    yield screen, final
    screen.stop()
    final.stop()


def cascade(screen: ModelServer, final: ModelServer, **kw) -> CascadeAgent:
    kw = {"n_final": 2, "n_drafts": 2, **kw}
    agent = make_llm_agent(
        "anthropic:claude-opus-5-5",
        screen_model="openai:gpt-5-mini",
        screen_base_url=screen.url,
        base_url=final.url,
        env=ENV,
        backoff_base_s=0.001,
        **kw,
    )
    assert isinstance(agent, CascadeAgent)
    return agent


def test_a_full_cascade_screens_merges_ranks_and_finishes_the_hardest(servers):
    screen, final = servers
    screen.script.append(Reply(SCREEN_ANSWER, input_tokens=20_000, output_tokens=6_000))
    final.script.append(Reply(FINAL_ANSWER, input_tokens=25_000, output_tokens=8_000))
    agent = cascade(screen, final)
    proposals = agent.propose(context(round_index=3))

    # The strong model wrote the two hardest directions; the screen's best drafts follow.
    assert [(p.model, p.direction) for p in proposals] == [
        ("anthropic:claude-opus-5-5", "persistent kernel processing several rows per program"),
        ("anthropic:claude-opus-5-5", "vectorize loads with a larger block"),
        ("openai:gpt-5-mini", "more warps per row"),
        ("openai:gpt-5-mini", "fewer warps to cut register pressure"),
    ]
    assert "persistent grid-stride" in proposals[0].source
    assert "NUM_WARPS = 2" in proposals[3].source
    [r] = agent.rounds
    assert (r.screened, r.merged) == (5, 4)  # candidates 1 and 2 are the same code

    # What each server was asked.
    [s_req] = screen.received
    [f_req] = final.received
    assert "List up to 6 distinct optimization directions" in s_req.prompt_text()
    sent = f_req.prompt_text()
    assert PROFILE in sent and HISTORY in sent
    assert "### Direction 1: persistent kernel processing several rows per program" in sent
    assert "### Direction 2: vectorize loads with a larger block" in sent
    assert "BLOCK = 2048" in sent  # the screen's draft, applied from its diff, as a sketch
    assert "more warps per row" not in sent  # easy directions never reach the strong model
    for req in (s_req, f_req):
        assert all(key not in req.raw for key in ENV.values())

    # The ledger equals the servers' usage fields times the bundled prices, and the
    # summary sets the cascade against the strong model doing both calls.
    screen_usd = (20_000 * 0.25 + 6_000 * 2.00) / 1e6
    final_usd = (25_000 * 4.00 + 8_000 * 20.00) / 1e6
    strong_only = (20_000 * 4.00 + 6_000 * 20.00) / 1e6 + final_usd
    assert [(e.model, e.stage, e.round) for e in agent.ledger.entries] == [
        ("gpt-5-mini", "screen", 3),
        ("claude-opus-5-5", "final", 3),
    ]
    assert [e.cost_usd for e in agent.ledger.entries] == pytest.approx([screen_usd, final_usd])
    summary = agent.cost_summary()
    c = summary["cascade"]
    assert c["cascade_usd"] == pytest.approx(screen_usd + final_usd)
    assert c["strong_only_usd"] == pytest.approx(strong_only)
    assert c["saved_usd"] == pytest.approx(strong_only - screen_usd - final_usd)
    assert summary["by_model"]["openai:gpt-5-mini"]["input_tokens"] == 20_000
    assert summary["by_round"]["3"]["calls"] == 2


def test_when_the_final_model_fails_twice_the_screen_drafts_still_count(servers):
    screen, final = servers
    screen.script.append(Reply(SCREEN_ANSWER))
    final.script.extend([Reply("I cannot help with that."), Reply("Still no.")])
    agent = cascade(screen, final)
    proposals = agent.propose(context())
    assert {p.model for p in proposals} == {"openai:gpt-5-mini"}
    # The two easy drafts, then the hard direction that had a draft (the diff one).
    assert [p.direction for p in proposals][-1] == "vectorize loads with a larger block"
    assert "twice answered" in agent.rounds[0].final_error
    assert [e.stage for e in agent.ledger.entries] == ["screen", "final", "final-retry"]


def test_a_plain_llm_agent_is_returned_without_screen_or_final_model(servers):
    screen, _ = servers
    screen.script.append(Reply(good_answer()))
    agent = make_llm_agent("openai:gpt-5-mini", base_url=screen.url, env=ENV)
    assert not isinstance(agent, CascadeAgent)
    assert len(agent.propose(context())) == 1


def test_direction_text_similarity_merges_rewordings_only():
    assert (
        direction_similarity(
            "fuse the three kernels into one row-wise kernel",
            "fuse all three kernels into a single row-wise kernel",
        )
        >= 0.7
    )
    assert direction_similarity("more warps per row", "persistent kernel over rows") < 0.7
    found = [
        ParsedCandidate("h1", direction="fuse the three kernels into one row-wise kernel"),
        ParsedCandidate("h2", direction="tune num_stages for the loads", difficulty=2),
        ParsedCandidate(
            "h3", direction="fuse all three kernels into a single row-wise kernel",
            difficulty=5, source=_src("BLOCK = 1024", "BLOCK = 512"),
        ),
    ]  # fmt: skip
    merged = merge_directions(found)
    assert len(merged) == 2
    first = merged[0]
    # Merged: first wording, the draft that one of them had, the highest difficulty.
    assert first.support == 2 and first.difficulty == 5 and first.candidate.source
    assert first.candidate.direction == "fuse the three kernels into one row-wise kernel"


def test_source_key_ignores_comments_and_layout_but_not_code():
    a = _src("NUM_WARPS = 4", "NUM_WARPS = 8")
    assert source_key(a) == source_key(a.replace("NUM_WARPS = 8", "NUM_WARPS  =  8  # tuned"))
    assert source_key(a) != source_key(_src("NUM_WARPS = 4", "NUM_WARPS = 16"))


def test_candidates_per_round_caps_the_cascade_and_the_final_model_writes_first(servers):
    screen, final = servers
    screen.script.append(Reply(SCREEN_ANSWER))
    final.script.append(Reply(FINAL_ANSWER))
    proposals = cascade(screen, final, per_round=2).propose(context())
    # Two candidates a round: the strong model's two hardest directions, no screen draft.
    judged = [p for p in proposals if not p.refused]
    assert [p.model for p in judged] == ["anthropic:claude-opus-5-5"] * 2
    # The screen's drafts are not dropped: each is recorded as refused, with why.
    assert [(p.model, p.direction, p.refused) for p in proposals[2:]] == [
        ("openai:gpt-5-mini", d, "not judged: ranked below this round's 0 draft(s) of the screen")
        for d in ("more warps per row", "fewer warps to cut register pressure")
    ]
    screen.script.append(Reply(SCREEN_ANSWER))
    final.script.append(Reply(FINAL_ANSWER))
    agent = cascade(screen, final, per_round=3, n_final=1)
    proposals = agent.propose(context())
    # One final direction (n_final), then the screen's drafts fill the round to three.
    judged = [p for p in proposals if not p.refused]
    assert [p.model for p in judged] == ["anthropic:claude-opus-5-5"] + ["openai:gpt-5-mini"] * 2
    # The final model's second candidate (one direction was asked for) and the screen's
    # third draft are recorded as refused, each with its reason; none is dropped.
    assert sorted(p.refused for p in proposals if p.refused) == [
        "not judged: ranked below this round's 2 draft(s) of the screen",
        "not judged: the answer had more than the 1 candidate(s) asked for",
    ]
    assert agent.rounds[0].refused == 2
    assert agent.rounds[0].final_directions == [
        "persistent kernel processing several rows per program"
    ]
