"""The judge's stochastic suite (a dropout-like mask inferred from the output, its rate
within a binomial bound, masks independent across seeds) (a part of judge.Judge); the
determinism suite is judged in judge_state.py."""

from __future__ import annotations

import torch

from kernelloop.evaluate.trusted.compare import (
    binomial_ok,
    infer_mask,
)
from kernelloop.evaluate.trusted.plan import Call


class StochasticMixin:
    def _stochastic(self, call: Call, out: torch.Tensor, refs: dict, tol, trivial: dict) -> None:
        assert self.st is not None
        inf = infer_mask(out, refs["keep"], refs["drop"], tol)
        if not inf.ok:
            self._fail_values(
                call,
                "stochastic",
                "stochastic",
                f"p={call.rate:g}: {inf.reason}",
                None,
                out,
                trivial,
                tol,
            )
            return
        n = int(inf.decidable.sum().item())
        dropped = int((inf.dropped & inf.decidable).sum().item())
        ok, text = binomial_ok(dropped, n, call.rate, self.st.confidence_sigmas)
        grp = self._groups.setdefault(call.group, {})
        if not ok:
            self._fail_values(
                call,
                "stochastic",
                "stochastic",
                f"p={call.rate:g}: {text}",
                None,
                out,
                trivial,
                tol,
            )
            return
        if call.role == "a":
            grp.update(out=out, mask=inf.dropped, dec=inf.decidable)
            self._pass(call, "stochastic", None, f"p={call.rate:g}: {text}")
        elif call.role == "same_seed":
            if "out" in grp and not _same_bytes(grp["out"], out):
                # the same inputs and seed, different bytes: a race or hidden state, whichever
                # suite happened to see it first
                self._fail(
                    call,
                    "stochastic",
                    "nondeterministic",
                    f"p={call.rate:g}: two calls with the same inputs and seed gave different "
                    "bytes (a race or hidden state)",
                )
            else:
                self._pass(call, "stochastic", None, f"p={call.rate:g}: same seed, same output")
        elif call.role == "other_seed" and "mask" in grp:
            both = grp["dec"] & inf.decidable
            m = int(both.sum().item())
            differ = int(((grp["mask"] != inf.dropped) & both).sum().item())
            expect = 2 * call.rate * (1 - call.rate)
            ok2, text2 = binomial_ok(differ, m, expect, self.st.confidence_sigmas)
            if differ == 0 or not ok2:
                self._fail(
                    call,
                    "stochastic",
                    "stochastic",
                    f"p={call.rate:g}: a different seed must give an independent mask; {text2} "
                    "(differing)",
                )
            else:
                self._pass(
                    call,
                    "stochastic",
                    None,
                    f"p={call.rate:g}: a different seed gave a different mask",
                )
            self._groups.pop(call.group, None)


def _same_bytes(a: torch.Tensor | None, b: torch.Tensor) -> bool:
    if a is None or a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(
        torch.equal(
            a.contiguous().reshape(-1).view(torch.uint8),
            b.contiguous().reshape(-1).view(torch.uint8),
        )
    )
