"""Bounded retries with exponential backoff and full jitter, for transient service errors.

The SDKs' own retry loops are switched off (`max_retries=0`) so that this table is the
only one: it is tested here, and its attempts show up in the cost ledger.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kernelloop.agents.llm.errors import ModelUnavailableError, TransientModelError

T = TypeVar("T")

# Status codes worth another attempt. 408/409/425 are the "try again" family; 429 is rate
# limiting; 5xx are server faults; 529 is Anthropic's "overloaded". Anything else (400,
# 401, 403, 404, 413, 422...) will fail the same way again, so it is not retried.
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


def is_transient_status(status: int) -> bool:
    return status in TRANSIENT_STATUS or status >= 500


@dataclass(frozen=True)
class RetryPolicy:
    """`max_attempts` counts the first try; waits grow as base_s * 2**k, capped at max_s."""

    max_attempts: int = 5
    base_s: float = 1.0
    max_s: float = 30.0

    def delay_s(self, attempt: int, rng: random.Random, retry_after_s: float | None) -> float:
        # Full jitter (uniform in [0, cap]) spreads out clients that failed together;
        # a server's Retry-After is a floor, since asking earlier only earns another 429.
        cap = min(self.max_s, self.base_s * (2**attempt))
        wait = rng.uniform(0.0, cap)
        if retry_after_s is not None:
            wait = max(wait, min(retry_after_s, self.max_s))
        return wait


@dataclass
class RetryLog:
    """What happened on the way to an answer: one reason per failed attempt."""

    failures: list[str]

    @property
    def attempts(self) -> int:
        return len(self.failures) + 1


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> tuple[T, RetryLog]:
    """Call `fn` until it returns or raises something other than `TransientModelError`."""
    rng = rng or random.Random()
    log = RetryLog(failures=[])
    for attempt in range(policy.max_attempts):
        try:
            return fn(), log
        except TransientModelError as e:
            log.failures.append(e.reason)
            if attempt + 1 < policy.max_attempts:
                sleep(policy.delay_s(attempt, rng, e.retry_after_s))
    raise ModelUnavailableError(
        f"{what} failed {policy.max_attempts} times in a row ({'; '.join(log.failures)}); "
        "check that the service is up, then rerun with --resume (or raise the retry budget)."
    )
