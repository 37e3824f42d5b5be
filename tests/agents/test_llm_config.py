"""Data files a team edits (price table, prompt templates), the retry table, and picking an
agent by name."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from llm_loopback import ModelServer, Reply, context, good_answer

from kernelloop.agents.llm import CascadeAgent, LLMAgent, load_price_table
from kernelloop.agents.llm.errors import (
    AgentSpecError,
    ModelUnavailableError,
    PriceTableError,
    PromptTemplateError,
    TransientModelError,
)
from kernelloop.agents.llm.prompts import load_prompts
from kernelloop.agents.llm.providers import Usage
from kernelloop.agents.llm.retry import RetryPolicy, call_with_retry
from kernelloop.agents.registry import make_agent

ENV = {"OPENAI_API_KEY": "sk-x-123456", "ANTHROPIC_API_KEY": "sk-ant-x-123456"}


def test_a_user_price_file_overrides_and_extends_the_bundled_table(tmp_path):
    f = tmp_path / "team_prices.toml"
    f.write_text(
        '[models."gpt-4.1"]\ninput = 1.0\noutput = 1.0\n'
        '[models."Qwen/*"]\ninput = 0.0\noutput = 0.0\n'
    )
    table = load_price_table(env={"KERNELLOOP_PRICES": str(f)})
    assert table.price_for("gpt-4.1").input == 1.0  # overridden
    assert table.price_for("gpt-4o").input == 2.5  # kept from the bundled table
    assert table.cost_usd("Qwen/Qwen3-Coder-30B", Usage(10**6, 10**6)) == 0.0  # priced, free
    assert table.cost_usd("some-unknown-model", Usage(1, 1)) is None
    assert table.sources == ("bundled prices.toml", str(f))


def test_dated_snapshots_match_but_newer_versions_do_not_inherit_a_price():
    table = load_price_table(env={})
    assert table.price_for("gpt-4.1-2025-04-14") == table.price_for("gpt-4.1")
    assert table.price_for("gpt-4.1-mini-2025-04-14") == table.price_for("gpt-4.1-mini")
    assert table.price_for("gpt-5.6-sol") is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[models."m"]\ninput = 1.0\n', "models.m.output"),
        ('[models."m"]\ninput = -1\noutput = 1\n', "models.m.input"),
        ('[models."m"]\ninput = 1\noutput = 1\ncached = 1\n', "models.m.cached"),
        ("[models\n", "not valid TOML"),
    ],
)
def test_a_bad_price_file_names_the_file_and_field(tmp_path, text, error):
    f = tmp_path / "p.toml"
    f.write_text(text)
    with pytest.raises(PriceTableError, match=error) as e:
        load_price_table(f, env={})
    assert str(f) in str(e.value)


def test_a_missing_price_file_says_which_variable_to_fix(tmp_path):
    with pytest.raises(PriceTableError, match="KERNELLOOP_PRICES"):
        load_price_table(env={"KERNELLOOP_PRICES": str(tmp_path / "nope.toml")})


def test_prompt_templates_are_overridden_file_by_file(tmp_path):
    (tmp_path / "propose.md").write_text(
        "TEAM TEMPLATE for ${task_name}: ${profile_summary}\n$$5 cap\n"
    )
    prompts = load_prompts(tmp_path)
    assert prompts.origins["propose"] == str(tmp_path / "propose.md")
    assert prompts.origins["system"] == "the bundled prompt system.md"
    out = prompts.render("propose", {"task_name": "t", "profile_summary": "P"})
    assert out == "TEAM TEMPLATE for t: P\n$5 cap\n"


def test_the_team_template_is_what_the_model_receives(tmp_path):
    (tmp_path / "propose.md").write_text("TEAM: ${profile_summary}\n${answer_format}\n")
    server = ModelServer("openai").start()
    try:
        server.script.append(Reply(good_answer()))
        agent = make_agent("openai:gpt-4.1", base_url=server.url, prompts_dir=tmp_path, env=ENV)
        agent.propose(context())
        user = server.received[0].body["messages"][1]["content"]
        assert user.startswith("TEAM: dram_throughput_pct=41.2")
        assert "### Candidate 1" in user  # the answer format still reaches the model
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("text", "error"),
    [("${profile}", r"uses \$\{profile\}.*use one of"), ("costs $5", "write a literal dollar as")],
)
def test_a_template_typo_fails_at_load_naming_the_file(tmp_path, text, error):
    (tmp_path / "screen.md").write_text(text)
    with pytest.raises(PromptTemplateError, match=error) as e:
        load_prompts(tmp_path)
    assert "screen.md" in str(e.value)


def test_retry_waits_grow_exponentially_with_jitter_and_are_bounded():
    policy = RetryPolicy(max_attempts=4, base_s=1.0, max_s=3.0)
    waits: list[float] = []

    def always_fails() -> None:
        raise TransientModelError("HTTP 503")

    with pytest.raises(ModelUnavailableError, match="failed 4 times"):
        call_with_retry(always_fails, policy, what="x", sleep=waits.append, rng=random.Random(0))
    assert len(waits) == 3  # no wait after the last attempt
    assert 0 <= waits[0] <= 1.0 and 0 <= waits[1] <= 2.0 and 0 <= waits[2] <= 3.0
    # A server's Retry-After is a floor (capped at max_s), since asking sooner earns a 429.
    assert policy.delay_s(0, random.Random(0), retry_after_s=2.5) == 2.5
    assert policy.delay_s(0, random.Random(0), retry_after_s=60.0) == 3.0


def test_make_agent_picks_by_name():
    a = make_agent("openai:gpt-4.1", env=ENV, per_round=2, unrelated_option=1)
    assert isinstance(a, LLMAgent) and a.n_candidates == 2
    c = make_agent("anthropic:claude-opus-5-5", screen_model="claude-haiku-5-5", env=ENV)
    assert isinstance(c, CascadeAgent)
    # A bare screen model name takes the --agent's provider.
    assert (c.screen.label, c.final.label) == (
        "anthropic:claude-haiku-5-5",
        "anthropic:claude-opus-5-5",
    )


def test_make_agent_builds_the_scripted_and_tuner_agents_lazily(tmp_path):
    folder = tmp_path / "cands"
    folder.mkdir()
    (folder / "01_warps.py").write_text(
        '"""Hypothesis: more warps."""\ndef forward(x):\n    return x\n'
    )
    scripted = make_agent(f"scripted:{folder}", screen_model=None, base_url="ignored")
    assert scripted.name == "scripted"
    from kernelloop.task.load import load_task

    flagship = Path(__file__).resolve().parents[2] / "examples" / "ln_softmax_dropout"
    tuner = make_agent("tuner", task=load_task(flagship), prompts_dir="ignored")
    assert tuner.name == "tuner"


@pytest.mark.parametrize(
    ("spec", "options", "error"),
    [
        ("gpt-4.1", {}, "unknown agent 'gpt-4.1'"),
        ("mistral:large", {}, "unknown agent"),
        ("tuner", {"screen_model": "openai:gpt-5-mini"}, "need a model agent"),
        ("tuner", {}, "needs the task"),
        ("openai:gpt-4.1", {"screen_model": "anthropic:", "env": ENV}, "cannot tell which service"),
    ],
)
def test_make_agent_errors_are_one_sentence_with_the_fix(spec, options, error):
    with pytest.raises(AgentSpecError, match=error):
        make_agent(spec, **options)


def test_candidates_per_round_default_by_agent_kind_and_task_rule():
    from kernelloop.agents.registry import default_candidates

    assert [default_candidates(s) for s in ("openai:m", "anthropic:m", "tuner")] == [2, 2, 2]
    assert default_candidates("scripted:/tmp/x") == 1
    assert default_candidates("scripted:/tmp/x", task_default=3) == 3  # the task's rule wins
    assert make_agent("openai:gpt-4.1", env=ENV, per_round=3).n_candidates == 3
