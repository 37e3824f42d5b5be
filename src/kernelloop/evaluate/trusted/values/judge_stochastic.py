"""The judge's randomness checks on every call with p > 0, in any suite (a dropout-like
mask inferred from the output element by element, its rate within a binomial bound overall
and by stratum, masks independent across neighbours and, in the stochastic suite, across
seeds) (a part of judge.Judge); the determinism suite's bytes and a kernel's state are
judged in judge_state.py."""

from __future__ import annotations

import torch

from kernelloop.evaluate.trusted.values.compare_mask import (
    MIN_PAIRS,
    binomial_ok,
    infer_mask,
    neighbours_problem,
    rate_problem,
)
from kernelloop.evaluate.trusted.values.mask_stats import pooled_problem, related_problem
from kernelloop.evaluate.trusted.values.plan import Call


class StochasticMixin:
    def mask_check(self, call: Call, out: torch.Tensor, refs: dict, tol):
        """The mask inferred from a call with p > 0, and (category, reason) when its output
        fails (else None): every element its kept or its dropped value
        (compare_mask.infer_mask), the dropped fraction within the binomial bound overall
        and in every stratum of the inputs and positions, the masks of rows and columns
        independent at many lags (mask_stats.py)."""
        inf = infer_mask(out, refs["keep"], refs["drop"], tol)
        p, sigmas = call.rate, self.st.confidence_sigmas
        if not inf.ok:
            wrong = "stochastic" if call.suite == "stochastic" else "wrong"
            category = inf.category if inf.category == "nonfinite" else wrong
            return inf, (category, f"p={p:g}: {inf.reason}")
        why = rate_problem(inf, refs["keep"], refs["drop"], p, sigmas)
        why = why or neighbours_problem(inf, p, sigmas)
        return inf, (None if why is None else ("stochastic", f"p={p:g}: {why}"))

    def _stochastic(self, call: Call, out: torch.Tensor, refs: dict, tol, trivial: dict) -> None:
        """A call with p > 0, in any suite: the value check of `mask_check` (every element
        kept or dropped, the rate overall and by stratum, neighbours independent); then a
        determinism pair's bytes, or the stochastic suite's seed checks."""
        assert self.st is not None
        inf, problem = self.mask_check(call, out, refs, tol)
        if problem is not None:
            category, reason = problem
            if not self._stateful(call, out, None):  # an earlier call's output (judge_state.py)
                self._fail_values(call, call.suite, category, reason, None, out, trivial, tol)
            return
        self._remember(call, out)
        why = self._pooled(call, inf)
        if why is not None:
            self._fail(call, call.suite, "stochastic", f"p={call.rate:g}: {why}")
            return
        if call.suite == "determinism":
            self._determinism(call, out, None)
            return
        if call.suite != "stochastic":
            self._pass(call, call.suite, None, f"p={call.rate:g}: every element kept or dropped")
            return
        n = int(inf.decidable.sum().item())
        dropped = int((inf.dropped & inf.decidable).sum().item())
        text = (
            binomial_ok(dropped, n, call.rate, self.st.confidence_sigmas)[1]
            if n
            else "no element decidable in this dtype (its rounding hides the dropout term)"
        )
        grp = self._groups.setdefault(call.group, {})
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
            how = call.relation or "another seed"
            why = related_problem(
                grp["mask"], grp["dec"], inf.dropped, inf.decidable, call.rate, how
            )
            if m < MIN_PAIRS:
                # Too few elements decidable in both calls (their dtype's rounding hides the
                # term): even the same mask twice would fit; other dtypes' calls decide.
                self._pass(
                    call,
                    "stochastic",
                    None,
                    f"p={call.rate:g}: {m} elements decidable in both calls, too few to "
                    "compare masks",
                )
            elif why is not None:
                self._fail(call, "stochastic", "stochastic", f"p={call.rate:g}: {why}")
            else:
                self._pass(
                    call,
                    "stochastic",
                    None,
                    f"p={call.rate:g}: {how} gave an independent mask",
                )
            self._groups.pop(call.group, None)

    def _pooled(self, call: Call, inf) -> str | None:
        """Add this call's strata counts (compare_mask.rate_problem) to the evaluation's
        pool — once per seed value: calls with one seed share a mask (a determinism pair,
        a refill), whose counts are not independent — and why the pooled fractions do not
        fit their rates (mask_stats.pooled_problem), or None."""
        assert self.st is not None
        if not inf.strata:
            return None
        seen = self.__dict__.setdefault("_mask_seeds", set())
        seed = call.params.get(self.st.seed_param)
        if seed in seen:
            return None
        seen.add(seed)
        pool = self.__dict__.setdefault("_mask_pool", {})
        for label, (n, k) in inf.strata.items():
            cell = pool.setdefault(label, {}).setdefault(call.rate, [0, 0])
            cell[0] += n
            cell[1] += k
        return pooled_problem(pool)


def _same_bytes(a: torch.Tensor | None, b: torch.Tensor) -> bool:
    if a is None or a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(
        torch.equal(
            a.contiguous().reshape(-1).view(torch.uint8),
            b.contiguous().reshape(-1).view(torch.uint8),
        )
    )
