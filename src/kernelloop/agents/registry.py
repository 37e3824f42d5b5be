"""Pick an agent by name: `openai:MODEL`, `anthropic:MODEL`, `tuner`, `scripted:DIR`.

Implementations are imported only when chosen, so `--agent tuner` never imports an SDK
and a machine without one still runs the loop.
"""

from __future__ import annotations

import inspect
from typing import Any

from kernelloop.agents.base import Agent
from kernelloop.agents.llm.errors import AgentSpecError

_LLM_ONLY = ("screen_model", "final_model", "screen_base_url", "final_base_url")


def _accepted(factory: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The options `factory` takes; the loop passes one option set to every kind of agent."""
    params = inspect.signature(factory).parameters
    return {k: v for k, v in options.items() if k in params and v is not None}


def default_candidates(spec: str, task_default: int | None = None, free_slots: int = 1) -> int:
    """How many proposals a round asks `spec`'s agent for when `--candidates` is not given:
    the task's `rules.candidates`, else for a model agent (several ideas per round) and for
    the tuner (a sweep) 2 or one per free GPU/slot of the executor if there are more, 1
    for a scripted agent (its folder sets the pace)."""
    if task_default is not None:
        return task_default
    kind = spec.partition(":")[0]
    return max(2, free_slots) if kind in ("openai", "anthropic", "tuner") else 1


def make_agent(spec: str, **options: Any) -> Agent:
    """Build the agent `spec` names. Options are passed to it where it takes them
    (task, per_round, screen_model, final_model, base_url, prompts_dir, prices, ...)."""
    kind, _, arg = spec.partition(":")
    if kind in ("openai", "anthropic"):
        from kernelloop.agents.llm import make_llm_agent

        return make_llm_agent(spec, **_accepted(make_llm_agent, options))
    if any(options.get(k) for k in _LLM_ONLY):
        raise AgentSpecError(
            f"--screen-model/--final-model need a model agent, not {spec!r}; pass "
            "--agent openai:MODEL or --agent anthropic:MODEL as well."
        )
    if kind == "tuner" and not arg:
        from kernelloop.agents.tuner import TunerAgent

        if options.get("task") is None:
            raise AgentSpecError("the tuner agent needs the task; pass task=... to make_agent.")
        return TunerAgent(**_accepted(TunerAgent, options))
    if kind == "scripted" and arg:
        from kernelloop.agents.scripted import ScriptedAgent

        return ScriptedAgent(arg, **_accepted(ScriptedAgent, {**options, "folder": None}))
    raise AgentSpecError(
        f"unknown agent {spec!r}; use tuner, scripted:DIR, openai:MODEL or anthropic:MODEL."
    )
