"""The llm agent through the real `openai` SDK against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from llm_loopback import (
    BASE_SOURCE,
    HISTORY,
    PROFILE,
    Fail,
    ModelServer,
    Reply,
    context,
    good_answer,
)

from kernelloop.agents.llm import LLMAgent, make_llm_agent
from kernelloop.agents.llm.errors import (
    MissingKeyError,
    ModelAnswerError,
    ModelRequestError,
    ModelUnavailableError,
)

KEY = "sk-test-secret-0123456789"


@pytest.fixture
def server():
    s = ModelServer("openai").start()
    yield s
    s.stop()


def agent(server: ModelServer, **kw) -> LLMAgent:
    options = dict(
        base_url=server.url, env={"OPENAI_API_KEY": KEY}, backoff_base_s=0.001, timeout_s=5.0
    )
    return make_llm_agent("openai:gpt-4.1", **{**options, **kw})


def test_a_good_answer_becomes_a_proposal_and_the_prompt_carries_profile_and_history(server):
    server.script.append(Reply(good_answer()))
    [p] = agent(server).propose(context())
    assert "NUM_WARPS = 8" in p.source and p.source != BASE_SOURCE
    assert p.hypothesis.startswith("occupancy is limited by registers")
    assert p.predicted_effect == "-10% median time on all shapes"
    assert p.direction == "more warps per row"
    assert p.model == "openai:gpt-4.1"
    [req] = server.received
    sent = req.prompt_text()
    assert PROFILE in sent and HISTORY in sent and "NUM_WARPS = 4" in sent
    assert req.body["model"] == "gpt-4.1" and req.body["messages"][0]["role"] == "system"
    # The key travels only in the auth header, never in what the model reads.
    assert KEY not in req.raw
    assert req.headers.get("authorization") == f"Bearer {KEY}"


def test_a_malformed_answer_gets_one_retry_that_quotes_the_parse_error(server):
    server.script.extend([
        Reply("Sure! I would increase the number of warps.\n```python\nNUM_WARPS = 8\n```"),
        Reply(good_answer()),
    ])  # fmt: skip
    a = agent(server)
    [p] = a.propose(context())
    assert "NUM_WARPS = 8" in p.source
    first, second = server.received
    msgs = second.body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"].startswith("Sure! I would increase")
    assert "there is no 'Hypothesis:' line" in msgs[3]["content"]
    assert [e.stage for e in a.ledger.entries] == ["propose", "propose-retry"]


def test_two_malformed_answers_are_a_model_answer_error(server):
    bad = Reply("Hypothesis: faster\n```python\ndef forward(x) return x\n```")
    server.script.extend([bad, bad])
    with pytest.raises(ModelAnswerError, match="not valid Python"):
        agent(server).propose(context())
    assert len(server.received) == 2


def test_a_429_is_retried_with_backoff_then_succeeds(server):
    server.script.extend([Fail(429, {"retry-after": "0"}), Reply(good_answer())])
    waits: list[float] = []
    a = agent(server, sleep=waits.append, backoff_base_s=0.5)
    [p] = a.propose(context())
    assert "NUM_WARPS = 8" in p.source
    assert len(server.received) == 2 and len(waits) == 1 and 0.0 <= waits[0] <= 0.5
    assert a.ledger.entries[0].attempts == 2


def test_a_timeout_is_retried_then_succeeds(server):
    server.script.extend([Reply(good_answer(), delay_s=2.0), Reply(good_answer(warps=16))])
    a = agent(server, timeout_s=0.4)
    [p] = a.propose(context())
    assert "NUM_WARPS = 16" in p.source  # the second answer, not the late first one
    assert a.ledger.entries[0].attempts == 2


def test_5xx_until_the_budget_runs_out_is_model_unavailable(server):
    server.script.extend([Fail(503)] * 3)
    with pytest.raises(ModelUnavailableError, match="failed 3 times.*HTTP 503"):
        agent(server, max_attempts=3).propose(context())
    assert len(server.received) == 3


def test_a_401_is_not_retried_and_names_the_key_variable_but_not_the_key(server):
    server.script.append(Fail(401))
    with pytest.raises(ModelRequestError, match="HTTP 401.*OPENAI_API_KEY") as e:
        agent(server).propose(context())
    assert KEY not in str(e.value)
    assert len(server.received) == 1


def test_the_ledger_is_usage_times_prices(server, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."gpt-4.1"]\ninput = 2.0\noutput = 8.0\ncache_read = 0.5\n')
    server.script.append(
        Reply(good_answer(), input_tokens=12_000, output_tokens=3_000, cache_read=4_000)
    )
    a = agent(server, prices=prices)
    a.propose(context(round_index=4))
    [row] = a.ledger.rows()
    assert row["model"] == "gpt-4.1" and row["provider"] == "openai" and row["round"] == 4
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_tokens"]) == (
        12_000,
        3_000,
        4_000,
    )
    # 8000 uncached input at $2, 4000 cached at $0.5, 3000 output at $8 (per million)
    assert row["cost_usd"] == pytest.approx((8_000 * 2.0 + 4_000 * 0.5 + 3_000 * 8.0) / 1e6)
    assert row["latency_s"] > 0 and row["priced"] is True
    assert KEY not in json.dumps(a.cost_summary())


def test_reasoning_models_get_max_completion_tokens_after_the_server_says_so(server):
    # OpenAI's reasoning models answer `max_tokens` with this 400; most compatible
    # servers only know `max_tokens`, so it stays the default.
    unsupported = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead."
    )
    server.script.extend(
        [Fail(400, message=unsupported), Reply(good_answer()), Reply(good_answer(16))]
    )
    a = agent(server, max_tokens=1234)
    a.propose(context())
    a.propose(context())
    first, second, third = (r.body for r in server.received)
    assert first["max_tokens"] == 1234 and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == 1234 and "max_tokens" not in second
    assert "max_tokens" not in third  # remembered


def test_any_other_400_is_a_request_error(server):
    server.script.append(Fail(400, message="model not loaded"))
    with pytest.raises(ModelRequestError, match="HTTP 400.*model not loaded"):
        agent(server).propose(context())


def test_a_missing_key_is_one_sentence_with_the_fix():
    with pytest.raises(MissingKeyError, match="export OPENAI_API_KEY"):
        make_llm_agent("openai:gpt-4.1", env={})


def test_a_local_server_needs_no_key(server):
    server.script.append(Reply(good_answer()))
    a = make_llm_agent("openai:qwen2.5-coder", base_url=server.url, env={})
    [p] = a.propose(context())
    assert p.model == "openai:qwen2.5-coder"
    [row] = a.ledger.rows()
    assert row["priced"] is False and row["cost_usd"] == 0.0
    assert a.ledger.unpriced_models() == ["openai:qwen2.5-coder"]
