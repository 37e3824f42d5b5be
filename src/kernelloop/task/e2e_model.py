"""How a task's `[e2e]` model is called (docs/task.md, "End-to-end equivalence"), the
same on both sides: the trusted side with the float64 reference as `op`, the worker with
the candidate's entry."""

from __future__ import annotations

import functools
import inspect


def build(model, op):
    """`model` as a function of its inputs: a class (an nn.Module) is built as `model(op)`,
    a function is called as `model(op, **inputs)`. `op` takes the entry's tensor arguments
    by keyword; the task's params are already bound to it."""
    if inspect.isclass(model):
        return model(op)
    return functools.partial(model, op)
