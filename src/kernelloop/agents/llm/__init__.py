"""LLM agents: one model (`LLMAgent`) or a cheap→strong cascade (`CascadeAgent`).

`make_llm_agent` is what the registry calls; everything it takes has a default, so
`make_llm_agent("openai:gpt-4.1")` with OPENAI_API_KEY set is a working agent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kernelloop.agents.llm.agent import LLMAgent
from kernelloop.agents.llm.cascade import CascadeAgent
from kernelloop.agents.llm.ledger import CostLedger, LedgerEntry
from kernelloop.agents.llm.prices import PriceTable, load_price_table
from kernelloop.agents.llm.prompts import load_prompts
from kernelloop.agents.llm.providers import parse_model_spec
from kernelloop.agents.llm.retry import RetryPolicy

if TYPE_CHECKING:
    from kernelloop.task.load import Task

__all__ = [
    "CascadeAgent",
    "CostLedger",
    "LLMAgent",
    "LedgerEntry",
    "PriceTable",
    "RetryPolicy",
    "load_price_table",
    "make_llm_agent",
]


def make_llm_agent(
    spec: str,
    *,
    task: Task | None = None,
    screen_model: str | None = None,
    final_model: str | None = None,
    base_url: str | None = None,
    screen_base_url: str | None = None,
    final_base_url: str | None = None,
    prompts_dir: str | Path | None = None,
    prices: str | Path | None = None,
    ledger: CostLedger | None = None,
    per_round: int | None = None,
    n_directions: int = 6,
    n_final: int = 3,
    n_drafts: int = 2,
    timeout_s: float = 600.0,
    max_tokens: int = 8192,
    temperature: float | None = None,
    max_attempts: int = 5,
    backoff_base_s: float = 1.0,
    backoff_max_s: float = 30.0,
    env: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> LLMAgent | CascadeAgent:
    """An LLM agent for `spec` ('openai:MODEL' / 'anthropic:MODEL').

    With `screen_model` and/or `final_model` it is a cascade; the one not given is `spec`.
    A bare model name in either takes `spec`'s provider. `base_url` goes to `spec`'s
    model; `screen_base_url` / `final_base_url` override it per stage (e.g. a local vLLM
    screen in front of a hosted final model).
    """
    # Imported here, not at the package's top: the launcher runs the key holder as
    # `python -m kernelloop.agents.llm.keyholder`, which imports this package first; had
    # the package imported the module too, runpy would warn on every run (issue 47).
    from kernelloop.agents.llm.keyholder import make_provider

    provider, _ = parse_model_spec(spec)
    retry = RetryPolicy(max_attempts=max_attempts, base_s=backoff_base_s, max_s=backoff_max_s)
    common = dict(
        timeout_s=timeout_s,
        max_tokens=max_tokens,
        temperature=temperature,
        retry=retry,
        sleep=sleep,
        env=env,
    )
    task_prompts = task.folder / "prompts" if task and (task.folder / "prompts").is_dir() else None
    prompts = load_prompts(task_prompts, prompts_dir)
    ledger = ledger or CostLedger(load_price_table(prices, env))
    max_cost = task.spec.rules.max_cost_usd if task else None

    def build(stage_spec: str, url: str | None):
        p, m = parse_model_spec(stage_spec, default_provider=provider)
        # `base_url` names spec's server; a stage on another provider cannot share it.
        return make_provider(
            f"{p}:{m}", base_url=url or (base_url if p == provider else None), **common
        )

    if screen_model is None and final_model is None:
        return LLMAgent(
            build(spec, base_url),
            ledger=ledger,
            prompts=prompts,
            n_candidates=per_round or 1,
            max_cost_usd=max_cost,
        )
    return CascadeAgent(
        build(screen_model or spec, screen_base_url),
        build(final_model or spec, final_base_url),
        ledger=ledger,
        prompts=prompts,
        n_directions=n_directions,
        n_final=n_final,
        n_drafts=n_drafts,
        n_candidates=per_round,
        max_cost_usd=max_cost,
    )
