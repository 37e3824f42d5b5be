"""The judge's side of `model_margin` (task/model_error.py says what it means): each call's
tolerance widened by the task's own model's error on that call's inputs — the task's
reference run a second time on the inputs as drawn in the judged dtype (no upcast), here,
on the judging device, at the judged size — measured once per call and cached with the
round's references (every candidate of a round shares it)."""

from __future__ import annotations

import math

import torch

from kernelloop.task.model_error import factor, model_used, note, widened
from kernelloop.task.spec import Tolerance
from kernelloop.task.torch_precision import pinned


class OwnErrorMixin:
    """The judge's side (a part of judge.Judge): each call's tolerance widened by the task's
    own model's error on that call's inputs, measured once per call and key (cached with
    the round's references: every candidate of a round shares it)."""

    def own_tolerance(self, call, tol: Tolerance) -> Tolerance:
        return widened(tol, factor(tol, self.own_used(call, tol)))

    def own_note(self, call, tol: Tolerance) -> str:
        """`tol` as the task gives it for the call (before widening): the note, or ""."""
        q = self.own_used(call, tol)
        return note(call.dtype, tol, q, factor(tol, q))

    def own_share(self, call, cmp) -> float | None:
        """The task's own model's share of the tolerance the candidate's `cmp.tol_used` is
        measured against (the call's tolerance, widened where it is), on the call's
        inputs; None where not measured (values/precision.py)."""
        if getattr(cmp, "tol_used", None) is None or call.suite == "e2e" or call.rate > 0:
            return None
        dtype = getattr(torch, call.dtype, None)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            return None
        tol = self.tolerance(call, torch.empty(0, dtype=dtype), own=False)
        q = self.own_used(call, tol)
        if math.isnan(q):
            return None
        f = factor(tol, q)
        # At least the share one unit in the last place takes (eps·|ref| within rtol·|ref|):
        # PyTorch's own error can be ~0 on a call by luck (a scalar loss: 1e-8 of the
        # tolerance on the CPU), and an honest kernel one rounding off is not imprecise.
        ulp = torch.finfo(dtype).eps / (tol.rtol * f) if tol.rtol > 0 else 0.0
        return max(q / f, ulp) or None

    def own_used(self, call, tol: Tolerance) -> float:
        """The task's own model's `used` on `call` (NaN: not measured — no margin, a call
        with p > 0, or the model failed to run in the judged dtype)."""
        if tol.model_margin is None or call.suite == "e2e" or call.rate > 0:
            return math.nan  # a p > 0 call's kept/dropped check has its own bound
        key = ("own", tol.atol, tol.rtol, *self._ref_key(call))

        def compute() -> dict:
            return {"used": torch.tensor(self._own_measure(call, tol), dtype=torch.float64)}

        if self.references is None:
            memo = self.__dict__.setdefault("_own_memo", {})
            if key not in memo:
                memo[key] = compute()
            return float(memo[key]["used"])
        return float(self.references.get(key, "cpu", compute)["used"])

    def _own_measure(self, call, tol: Tolerance) -> float:
        try:
            inputs = self._inputs(call)
            refs = self.value_refs(call, inputs)
            params = {**self.task.spec.params, **call.params}
            # At the task's precision contract, not PyTorch's per-backend defaults (cuDNN's
            # TF32 would widen the tolerance by the rounding the contract forbids).
            with torch.no_grad(), pinned(self.task.spec.precision.tf32):
                own = self.reference(**inputs, **params)
        except Exception:  # noqa: BLE001 - the task's own code: unmeasured, nothing widened
            return math.nan
        ref_list = [refs["ref"]] if "ref" in refs else [refs[f"ref.{k}"] for k in range(len(refs))]
        return model_used(own, ref_list, tol)
