"""How a task's `[e2e]` model is called (docs/task.md, "End-to-end equivalence"), the
same on both sides: the trusted side with the float64 reference as `op`, the worker with
the candidate's entry."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING

from kernelloop.task.model_error import margin_words

if TYPE_CHECKING:
    from kernelloop.task.load import Task


def build(model, op):
    """`model` as a function of its inputs: a class (an nn.Module) is built as `model(op)`,
    a function is called as `model(op, **inputs)`. `op` takes the entry's tensor arguments
    by keyword; the task's params are already bound to it."""
    if inspect.isclass(model):
        return model(op)
    return functools.partial(model, op)


def e2e_section(task: Task, dtypes: list[str]) -> str:
    """The contract's words on the `[e2e]` check (task/contract.py), "" without one."""
    e2e = task.spec.e2e
    if e2e is None:
        return ""
    tol = "; ".join(
        f"{d}: atol={e2e.tolerances[d].atol:g}, rtol={e2e.tolerances[d].rtol:g}"
        for d in task.e2e_dtypes(dtypes)
    )
    off = f" with {task.spec.stochastic.rate_param}=0" if task.spec.stochastic else ""
    return (
        "### End to end\n"
        f"After every per-op check passes, the model `{e2e.model}` calls your `"
        f"{task.spec.task.entry}` several times{off}; its final output must match the same "
        "model on the float64 reference within its own tolerance "
        f"({tol}). An error that always leans the same way adds up there even when each "
        "call is inside the per-op tolerance."
        + margin_words(
            [e2e.tolerances[d] for d in task.e2e_dtypes(dtypes)], "the model on the reference"
        )
    )
