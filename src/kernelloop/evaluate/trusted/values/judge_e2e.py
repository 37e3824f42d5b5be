"""The judge's end-to-end check (a part of judge.Judge): the task's `[e2e]` model, run here
with the float64 reference op on the call's seeded inputs, against the final output the
worker's model produced with the candidate as its op (docs/task.md, "End-to-end
equivalence").

Per-op checks bound each call's error; a bias inside that bound (always rounding the
same way) can still add up over a model's layers. This check compares what a model
built on the op finally computes, under the model's own tolerance. The model is trusted
task code; only its output, read from the worker's output file like every call's, comes
from the candidate's process.
"""

from __future__ import annotations

import math

import torch

from kernelloop.evaluate.trusted.channel.outputs import OutputDir
from kernelloop.evaluate.trusted.values.compare import within_tolerance
from kernelloop.evaluate.trusted.values.plan import Call
from kernelloop.task import Task
from kernelloop.task import model_error as own_error
from kernelloop.task.e2e_model import build
from kernelloop.task.torch_precision import pinned


def e2e_job(task: Task) -> dict | None:
    """Where the worker finds the task's `[e2e]` model and its inputs (trusted files in
    the task folder, which it reads from their source text), or None without one."""
    if task.spec.e2e is None:
        return None
    (model_file, model), (inputs_file, inputs) = (
        task.e2e_file_and_name("model"),
        task.e2e_file_and_name("inputs"),
    )
    return {
        "model_file": str(model_file),
        "model": model,
        "inputs_file": str(inputs_file),
        "inputs": inputs,
    }


class E2EMixin:
    def _e2e_functions(self) -> tuple:
        if getattr(self, "_e2e", None) is None:
            self._e2e = self.task.load_e2e()
        return self._e2e

    def e2e_inputs(self, call: Call) -> dict:
        """The model's inputs for `call`, from its secret seed (the worker draws the same)."""
        g = torch.Generator(device=self.device).manual_seed(call.input_seed)
        make = self._e2e_functions()[1]
        return make(call.shape.dims, getattr(torch, call.dtype), self.device, g)

    def e2e_ref(self, call: Call, inputs: dict | None = None) -> torch.Tensor:
        """The model's output in float64: its inputs (drawn in the call's dtype) upcast, the
        task's reference as its op, every op keyword argument as the worker gets it."""

        def compute() -> dict:
            given = self.e2e_inputs(call) if inputs is None else inputs
            up = {k: _up(v) for k, v in given.items()}
            params = {**self.task.spec.params, **call.params}
            reference = self.reference

            def op(**kw):
                return reference(**{k: _up(v) for k, v in kw.items()}, **params)

            with torch.no_grad():
                return {"ref": build(self._e2e_functions()[0], op)(**up)}

        if self.references is None:
            return compute()["ref"]
        return self.references.get(("e2e", *self._ref_key(call)), self.device, compute)["ref"]

    def e2e_own_used(self, call: Call, tol) -> float:
        """How much of the e2e tolerance the model uses built on the task's own reference in
        the judged dtype (inputs as drawn, no upcast: PyTorch's own model in that dtype,
        here), against the float64 model; NaN without a `model_margin` or where it fails."""
        if tol.model_margin is None:
            return math.nan

        def compute() -> dict:
            try:
                inputs = self.e2e_inputs(call)
                params = {**self.task.spec.params, **call.params}
                reference = self.reference

                def op(**kw):
                    return reference(**kw, **params)

                with torch.no_grad(), pinned(self.task.spec.precision.tf32):
                    own = build(self._e2e_functions()[0], op)(**inputs)
                q = own_error.model_used(own, [self.e2e_ref(call)], tol)
            except Exception:  # noqa: BLE001 - the task's own code: unmeasured, not widened
                q = math.nan
            return {"used": torch.tensor(q, dtype=torch.float64)}

        if self.references is None:
            return float(compute()["used"])
        key = ("e2e-own", tol.atol, tol.rtol, *self._ref_key(call))
        return float(self.references.get(key, "cpu", compute)["used"])

    def _judge_e2e(self, call: Call, msg: dict, outputs: OutputDir) -> None:
        ref = self.e2e_ref(call)
        if not isinstance(ref, torch.Tensor) or not ref.is_floating_point():
            self._fail(
                call, "e2e", "setup", "the task's [e2e] model must return one floating tensor"
            )
            return
        like = torch.empty(ref.shape, dtype=getattr(torch, call.dtype), device=self.device)
        if not self._interface(call, msg, like, [like]):
            return
        nbytes = like.numel() * like.element_size()
        raw = outputs.read(call.id, nbytes)  # checked as every call's output is
        out = torch.frombuffer(raw, dtype=torch.uint8) if nbytes else like.cpu()
        out = out.view(like.dtype).reshape(like.shape).to(self.device)
        given = self.task.spec.e2e.tolerances[call.dtype]
        q = self.e2e_own_used(call, given)
        f = own_error.factor(given, q)
        tol, said = own_error.widened(given, f), own_error.note(call.dtype, given, q, f)
        own = "" if math.isnan(q) else f"; the model on the task's own op in {call.dtype}: {q:.3g}x"
        cmp = within_tolerance(out, ref, tol)
        if cmp.passed:
            self._pass(call, "e2e", cmp, f"the model's final output (atol {tol.atol:g}, rtol "
                       f"{tol.rtol:g}{own}){said}")  # fmt: skip
            return
        category = "nonfinite" if cmp.category == "nonfinite" else "e2e"
        self._fail(
            call,
            "e2e",
            category,
            f"the [e2e] model built on the candidate drifted from the same model on the "
            f"reference op: {cmp.reason} (its own tolerance: atol {given.atol:g}, rtol "
            f"{given.rtol:g}{own}){said}",
            cmp,
        )


def _up(v):
    return v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
