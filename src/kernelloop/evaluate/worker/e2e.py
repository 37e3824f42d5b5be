"""The worker's side of the end-to-end check (`[e2e]` in task.toml, docs/task.md): the
task's trusted model file, run with the candidate's entry as its op.

The model file is the task's own (read from its source text, like the input generator);
the worker only runs it. What it returns is an output like any other call's: its bytes
cross the same output-file protocol and the trusted side compares them with the model run
on the float64 reference op (trusted/values/judge_e2e.py).
"""

from __future__ import annotations

import functools

from kernelloop.task.e2e_model import build


def load(job: dict, import_file) -> tuple | None:
    """(model, make_inputs) of the job's `[e2e]` model, or None when the task has none."""
    spec = job.get("e2e")
    if not spec:
        return None
    model = getattr(import_file(spec["model_file"], "kernelloop_task_e2e_model"), spec["model"])
    inputs = getattr(import_file(spec["inputs_file"], "kernelloop_task_e2e_inputs"), spec["inputs"])
    return model, inputs


def make_inputs(e2e_inputs):
    """The model's input generator in the shape the harness calls: (dims, dtype, device,
    generator, case); the model's inputs have no cases."""

    def generate(dims, dtype, device, generator, case="model"):
        del case
        return e2e_inputs(dims, dtype, device, generator)

    return generate


def bind(model, op, param_names) -> object:
    """A callable the harness calls like an entry (`f(**inputs, **params)`): the params go
    to every call of `op`, the inputs to the model."""
    names = frozenset(param_names)

    def run(**kw):
        params = {k: kw.pop(k) for k in list(kw) if k in names}
        return build(model, functools.partial(op, **params))(**kw)

    return run
