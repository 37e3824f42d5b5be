"""How many profiles of candidate sources an external agent may ask for in one run.

Over MCP, `profile` runs any source in the sandbox (and, on a GPU, under Nsight Compute:
seconds of a GPU each time) without spending a round, so without a budget an agent could
profile without end. Each profile of a source that actually runs counts; the best's own
summary (already made when it became the best) and a source the static screen refuses
(nothing runs) do not. The limit is the task rule `max_profiles`, by default twice the
run's rounds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kernelloop.errors import KernelloopError
from kernelloop.task.spec import Rules

PROFILES_PER_ROUND = 2


@dataclass
class ProfileBudget:
    limit: int
    used: int = 0

    @classmethod
    def for_run(cls, rules: Rules, rounds: int) -> ProfileBudget:
        limit = (
            rules.max_profiles if rules.max_profiles is not None else PROFILES_PER_ROUND * rounds
        )
        return cls(limit=max(0, limit))

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)

    @contextmanager
    def spend(self) -> Iterator[None]:
        """Around one profile: refuses when none is left; counts it unless the static screen
        refused the source (then nothing ran)."""
        from kernelloop.profile.run import ScreenRefused

        if self.left <= 0:
            raise KernelloopError(
                f"this run's profile budget is spent ({self.used} of {self.limit} profiles of "
                "candidate sources); submit_candidate to measure, profile the best (no source), "
                "or raise the task rule max_profiles."
            )
        try:
            yield
        except ScreenRefused:
            raise
        except BaseException:
            self.used += 1  # it ran (and failed): the sandbox and the device were used
            raise
        self.used += 1
