"""The stages of one evaluation, cheapest first, timed on the trusted side.

static screen → start (sandbox and the worker's imports) → compile (the first call of
every dtype: the candidate's kernels compile) → smoke (one mid-size shape, random and
stochastic) → full correctness → e2e (the task's `[e2e]` model, if any) → timing. The
plan (`plan.STAGES`) puts the calls in this order and the worker runs them in order;
the trusted side stops the worker at the first failure, so the stages after it are
`not run` and a rejected candidate is never timed.

Times are wall-clock seconds on the trusted side, from one stage's end to the next's:
what the stage cost the person waiting, whatever ran in parallel. The worker only
decides when its messages arrive; a worker that sends them out of order only blurs the
boundaries between its own stages.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from kernelloop.evaluate.trusted.values.plan import STAGES, Plan
from kernelloop.evaluate.trusted.values.record import StageTime

ORDER = ("static", "start", *STAGES, "timing")


class StageClock:
    def __init__(
        self,
        plan: Plan,
        say: Callable[[str], None] = lambda _m: None,
        on_passed: dict[str, Callable[[], None]] | None = None,
    ) -> None:
        self.say = say
        # {stage: called once, when that stage has passed} (never after a failure)
        self.on_passed = dict(on_passed or {})
        self.left = Counter(c.stage for c in plan.calls)
        self.calls = Counter(c.stage for c in plan.calls)
        self.done: dict[str, StageTime] = {}
        self.judge_s: Counter[str] = Counter()  # trusted-side seconds per stage
        self.t = time.monotonic()
        self.current: str | None = "static"
        self.failed_in: str | None = None  # the stage of the first failed check
        self.failed_check: str | None = None  # that check: `<category> in <suite>`

    def _close(self, name: str, status: str, check: str | None = None) -> None:
        if status == "passed" and (hook := self.on_passed.pop(name, None)) is not None:
            hook()
        now = time.monotonic()
        self.done[name] = StageTime(
            name=name,
            seconds=round(now - self.t, 3),
            calls=self.calls.get(name, 0) - max(self.left.get(name, 0), 0),
            status=status,
            judge_seconds=round(self.judge_s[name], 3),
            failed_check=check if status == "failed" else None,
        )
        self.t = now

    def advance(self, to: str) -> None:
        """The current stage passed (and any between it and `to`, which had nothing to
        do); `to` starts now."""
        if self.current is None or ORDER.index(to) <= ORDER.index(self.current):
            return
        for name in ORDER[ORDER.index(self.current) : ORDER.index(to)]:
            self._close(name, "passed")
        self.current = to

    def elapsed_in(self, stage: str) -> float | None:
        """Seconds since `stage` began, while it is the stage in progress (else None)."""
        return time.monotonic() - self.t if self.current == stage else None

    def judged(
        self, stage: str, failed: bool, seconds: float = 0.0, check: str | None = None
    ) -> None:
        """One call of `stage` was judged in `seconds`; `failed`: it rejected the candidate.

        Several workers (shards.py) send their calls concurrently, so a call of a later
        stage may be judged while an earlier stage still has calls left: a stage ends when
        its last call is judged and every stage before it has ended (`full`, the last, at
        the workers' end), and none ends after a failure (`close` says how each did)."""
        if stage not in STAGES or self.current is None:
            return
        self.judge_s[stage] += seconds
        self.left[stage] -= 1
        if failed and (self.failed_in is None or ORDER.index(stage) < ORDER.index(self.failed_in)):
            self.failed_in = stage  # the earliest stage with a failure (plan order decides)
            self.failed_check = check
        if self.current not in STAGES:
            self.advance(STAGES[0])
        while (
            self.failed_in is None and self.current in STAGES[:-1] and self.left[self.current] <= 0
        ):
            self.say(f"{self.current} passed in {time.monotonic() - self.t:.1f} s")
            self.advance(ORDER[ORDER.index(self.current) + 1])

    def close(self, status: str, through: str | None = None, check: str | None = None) -> None:
        """End the stage in progress with `status`; when it passed, the stages after it
        up to `through` passed too (they had nothing left to do). When a check failed in a
        later stage than the one in progress (another worker ran ahead), the stages before
        the failed one end `stopped` if calls of theirs never ran (`passed` if all did).

        A failure no call's check found (`check`: one judged across the calls once they
        all ran, e.g. the tolerance's sensitivity) is charged to the last stage that ran
        calls, never to a stage with nothing to do (an e2e stage on a task without one)."""
        if self.current is None:
            return
        check = self.failed_check or check
        if (
            status == "failed"
            and self.failed_in is None
            and self.current in STAGES
            and not self.calls.get(self.current)
        ):
            ran = [n for n in STAGES if self.calls.get(n) and n in self.done]
            if ran:
                last = self.done[ran[-1]]
                self.done[ran[-1]] = last.model_copy(
                    update={"status": "failed", "failed_check": check}
                )
                for name in ORDER[ORDER.index(self.current) :]:
                    self.done.setdefault(name, StageTime(name=name, status="not run"))
                self.current = None
                return
        if status == "failed" and self.failed_in is not None:
            while ORDER.index(self.current) < ORDER.index(self.failed_in):
                self._close(self.current, "stopped" if self.left[self.current] > 0 else "passed")
                self.current = ORDER[ORDER.index(self.current) + 1]
        last = ORDER.index(through) if through and status == "passed" else 0
        self._close(self.current, status, check)
        for name in ORDER[ORDER.index(self.current) + 1 : last + 1]:
            self._close(name, "passed")
        self.current = None

    def stages(self, timing: str = "not run") -> list[StageTime]:
        """Every stage in order; one that never ran is `not run` (timing: `timing`)."""
        out = [
            self.done.get(name)
            or StageTime(name=name, status=timing if name == "timing" else "not run")
            for name in ORDER
        ]
        # A task without an `[e2e]` model has no e2e calls: that stage is skipped, not run.
        return [
            s.model_copy(update={"status": "skipped", "seconds": 0.0, "judge_seconds": 0.0})
            if s.name == "e2e" and not self.calls.get("e2e") and s.status != "skipped"
            else s
            for s in out
        ]


def summary(stages: list[StageTime]) -> str:
    """One line for a person, the stages that ran (or were skipped), the failed one with
    the check that failed, and after a failure the stages that never ran:
    `static 0.0 s · start 3.1 s · compile 1.2 s (failed: interface in random; not a compile
    error) · never ran: smoke, full`."""
    parts, never = [], []
    for s in stages:
        if s.status == "not run":
            never.append(s.name)
        elif s.status == "skipped":
            parts.append(f"{s.name} {s.status}")
        elif s.status == "failed" and s.failed_check:
            note = (
                ""
                if s.name != "compile" or s.failed_check.startswith("compile")
                else ("; not a compile error")
            )
            parts.append(f"{s.name} {s.seconds:.1f} s (failed: {s.failed_check}{note})")
        else:
            mark = f" ({s.status})" if s.status in ("failed", "stopped") else ""
            parts.append(f"{s.name} {s.seconds:.1f} s{mark}")
    if never and any(s.status in ("failed", "stopped") for s in stages):
        parts.append(f"never ran: {', '.join(never)}")
    return " · ".join(parts)
