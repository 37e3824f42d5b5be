"""The llm agent through the real `anthropic` SDK against a loopback Messages API server."""

from __future__ import annotations

import pytest
from llm_loopback import HISTORY, PROFILE, Fail, ModelServer, Reply, context, good_answer

from kernelloop.agents.llm import make_llm_agent
from kernelloop.agents.llm.errors import MissingKeyError, ModelAnswerError

KEY = "sk-ant-test-secret-abcdef"


@pytest.fixture
def server():
    s = ModelServer("anthropic").start()
    yield s
    s.stop()


def agent(server: ModelServer, **kw):
    options = dict(
        base_url=server.url, env={"ANTHROPIC_API_KEY": KEY}, backoff_base_s=0.001, timeout_s=5.0
    )
    return make_llm_agent("anthropic:claude-sonnet-5-5", **{**options, **kw})


def test_the_request_is_a_messages_call_with_the_context_and_no_key(server):
    server.script.append(Reply(good_answer()))
    [p] = agent(server, max_tokens=4000).propose(context())
    assert "NUM_WARPS = 8" in p.source and p.model == "anthropic:claude-sonnet-5-5"
    [req] = server.received
    assert req.path == "/v1/messages"
    body = req.body
    assert body["model"] == "claude-sonnet-5-5" and body["max_tokens"] == 4000
    assert "GPU kernel performance engineer" in body["system"]
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert PROFILE in req.prompt_text() and HISTORY in req.prompt_text()
    assert KEY not in req.raw


def test_a_malformed_answer_then_a_good_one(server):
    # A diff whose context does not exist in the best source: refused, not guessed at.
    garbage = (
        "Hypothesis: more warps\n```diff\n@@ -5,3 +5,3 @@\n BLOCK = 512\n-NUM_WARPS = 2\n"
        "+NUM_WARPS = 8\n```\n"
    )
    server.script.extend([Reply(garbage), Reply(good_answer())])
    [p] = agent(server).propose(context())
    assert "NUM_WARPS = 8" in p.source
    retry = server.received[1].body["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert "the diff cannot be applied: hunk 1" in retry[2]["content"]
    assert "'BLOCK = 512' is not where the hunk says" in retry[2]["content"]


def test_an_answer_cut_off_at_max_tokens_says_so_in_the_retry(server):
    cut = Reply("Hypothesis: x\n```python\nimport triton\n", stop="max_tokens")
    server.script.extend([cut, cut])
    with pytest.raises(ModelAnswerError, match="cut off at the token limit"):
        agent(server).propose(context())
    assert "cut off at the token limit" in server.received[1].body["messages"][2]["content"]


def test_429_and_overloaded_529_are_retried(server):
    server.script.extend([Fail(429), Fail(529), Reply(good_answer())])
    a = agent(server)
    [p] = a.propose(context())
    assert len(server.received) == 3 and a.ledger.entries[0].attempts == 3


def test_a_timeout_then_success(server):
    server.script.extend([Reply(good_answer(), delay_s=2.0), Reply(good_answer(warps=2))])
    a = agent(server, timeout_s=0.4)
    [p] = a.propose(context())
    assert "NUM_WARPS = 2" in p.source and a.ledger.entries[0].attempts == 2


def test_the_ledger_prices_cache_reads_and_writes(server):
    server.script.append(
        Reply(
            good_answer(),
            input_tokens=500,
            output_tokens=2_000,
            cache_read=30_000,
            cache_write=6_000,
        )
    )
    a = agent(server)  # the bundled table: claude-sonnet-5-5 = 2 / 10, read 0.10, write 2.50
    a.propose(context(round_index=1))
    [e] = a.ledger.entries
    # Anthropic's input_tokens excludes cached tokens; the ledger counts every prompt token.
    assert e.input_tokens == 500 + 30_000 + 6_000
    assert (e.cache_read_tokens, e.cache_write_tokens, e.output_tokens) == (30_000, 6_000, 2_000)
    want = (500 * 2.0 + 30_000 * 0.10 + 6_000 * 2.50 + 2_000 * 10.0) / 1e6
    assert e.cost_usd == pytest.approx(want)
    assert a.cost_summary()["cost_usd"] == pytest.approx(want, abs=1e-6)


def test_a_missing_key_is_one_sentence_with_the_fix():
    with pytest.raises(MissingKeyError, match="export ANTHROPIC_API_KEY"):
        make_llm_agent("anthropic:claude-sonnet-5-5", env={})
