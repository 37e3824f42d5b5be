"""Trivial outputs and the sensitivity proof (a part of judge.Judge): a failed value check
is named `trivial` when the output is one of the trivial outputs (zeros, the input, no
dropout...; sensitivity.py), with what the output is instead where it can be told
(diagnose.py); and every evaluation proves that its plan rejects each trivial output
somewhere, or it rejects itself — a pass that would prove nothing is not a pass."""

from __future__ import annotations

import torch

from kernelloop.evaluate.trusted.values import diagnose
from kernelloop.evaluate.trusted.values.compare import within_tolerance
from kernelloop.evaluate.trusted.values.failure import Failure
from kernelloop.evaluate.trusted.values.plan import Call
from kernelloop.evaluate.trusted.values.record import CheckResult
from kernelloop.evaluate.trusted.values.sensitivity import TrivialOutputs, matching_trivial

NO_DROPOUT = TrivialOutputs.NO_DROPOUT
DIAGNOSED_CALLS = 3  # failed calls per evaluation told what their output is instead


class TrivialMixin:
    def _prove(self, call: Call, trivial: dict, refs: dict, tol) -> None:
        for name in self.sensitivity.pending(list(trivial)):
            if self._value_fails(call, trivial[name].to(self.device), refs, tol):
                self.sensitivity.mark(
                    name, f"{call.suite}/{call.case} {call.shape.label} {call.dtype}"
                )

    def _fail_values(
        self, call: Call, suite: str, category: str, reason: str, cmp, out, trivial, tol
    ) -> None:
        """A failed value check, named `trivial` when the output is one of the trivial outputs."""

        refs_of_call = self.value_refs(call)
        single = "ref" in refs_of_call or "keep" in refs_of_call  # one output tensor
        likes = [out] if single else self._part_likes(call, refs_of_call)

        def close(a, b):
            if single:
                return within_tolerance(a, b.to(torch.float64), tol).passed
            # packed parts: the same per-output comparison, with `b` as the reference
            parts = {f"ref.{k}": r.to(torch.float64) for k, r in enumerate(unpack(b, likes))}
            return self._compare(call, a, parts, tol).passed

        # "No dropout" proves that the mask is checked; an output that ignores the rate is
        # told so by the check itself (stochastic), not called a trivial output.
        looked = {k: v.to(self.device) for k, v in trivial.items() if k != NO_DROPOUT}
        name = matching_trivial(out, looked, close)
        if name is not None:
            category, reason = "trivial", f"the output is {name}, not a computed result ({reason})"
        elif "ref" in refs_of_call and self._diagnosed < DIAGNOSED_CALLS:
            self._diagnosed += 1
            given = self._inputs(call)
            reason += diagnose.ignored_input(
                given, out, lambda v: self._ref(v, call), self._close(call)
            )
        self._fail(call, suite, category, reason, cmp)

    def _close(self, call: Call):
        """`close(out, ref)`: one output within its dtype's tolerance of a reference."""
        return lambda o, r: (
            r.shape == o.shape and within_tolerance(o, r, self.tolerance(call, o)).passed
        )

    def finish_sensitivity(self, prove: bool = True) -> None:
        """Record the proof; an unproven plan rejects, because a pass would then prove nothing.
        `prove=False` (already rejected elsewhere) only records what was caught."""
        for name, where in sorted(self.sensitivity.caught.items()):
            self.checks.append(
                CheckResult(
                    suite="sensitivity",
                    case=name,
                    shape="all",
                    dtype="all",
                    passed=True,
                    reason=f"a trivial output ({name}) fails {where}",
                )
            )
        if self.failures or not prove:
            return  # already rejected: an incomplete proof adds nothing
        for name in self.sensitivity.uncaught():
            reason = (
                f"no planned check rejects a trivial output ({name}), so a pass would prove "
                "nothing; tighten the task's tolerances ([tolerances] in task.toml; an imported "
                "KernelBench problem: import it again with --atol) or add an input case where "
                "it differs from the reference"
            )
            self.checks.append(
                CheckResult(
                    suite="sensitivity",
                    case=name,
                    shape="all",
                    dtype="all",
                    passed=False,
                    reason=reason,
                )
            )
            self.failures.append(Failure("setup", f"sensitivity: {reason}"))


def parts_of(refs: dict) -> list[torch.Tensor]:
    return [refs[f"ref.{k}"] for k in range(len(refs))]


def unpack(packed: torch.Tensor, likes: list[torch.Tensor]) -> list[torch.Tensor]:
    """Several outputs from their packed bytes (worker/calls.packed), each shaped like
    its `like`."""
    flat = packed.reshape(-1).view(torch.uint8)
    out, at = [], 0
    for like in likes:
        n = like.numel() * like.element_size()
        out.append(flat[at : at + n].view(like.dtype).reshape(like.shape))
        at += n
    return out
