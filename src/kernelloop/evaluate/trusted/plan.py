"""Which calls a correctness evaluation makes: suites × cases × shapes × dtypes.

Every input seed and every call seed comes from a secret, fresh `secrets` draw per
evaluation, so a candidate cannot precompute or replay results.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

from kernelloop.task import Shape, Task

LARGE_NUMEL = 4 << 20  # above this, one random draw and one stochastic rate


@dataclass
class Call:
    id: str
    suite: str
    case: str
    shape: Shape
    dtype: str
    input_seed: int
    params: dict
    group: str = ""  # calls compared with each other (determinism, seeds)
    role: str = ""  # "a", "same_seed", "other_seed", "repeat"
    rate: float = 0.0
    # Every call runs under the aten-op recorder: auditing only the first let a
    # candidate be honest once and call PyTorch afterwards.
    audit: bool = True

    def to_job(self) -> dict:
        return {
            "id": self.id,
            "dims": self.shape.dims,
            "dtype": self.dtype,
            "case": self.case,
            "input_seed": self.input_seed,
            "params": self.params,
            "audit": self.audit,
        }


@dataclass
class Plan:
    calls: list[Call] = field(default_factory=list)

    def by_id(self) -> dict[str, Call]:
        return {c.id: c for c in self.calls}


def _seed() -> int:
    return secrets.randbits(62)


def _call_seed() -> int:
    return secrets.randbits(31)


def plan_calls(task: Task, shapes: list[Shape], dtypes: list[str], *, unseen: bool = True) -> Plan:
    """The calls of one evaluation; with `unseen`, plus a shape drawn now that no file names."""
    spec = task.spec
    st = spec.stochastic
    plan = Plan()
    rate_name = st.rate_param if st else None
    seed_name = st.seed_param if st else None

    def params(rate: float | None = None, seed: int | None = None) -> dict:
        p: dict = {}
        if rate_name is not None:
            p[rate_name] = 0.0 if rate is None else rate
        if seed_name is not None:
            p[seed_name] = _call_seed() if seed is None else seed
        return p

    for si, shape in enumerate(shapes):
        large = _numel(shape) > LARGE_NUMEL
        for dtype in dtypes:
            base = f"{shape.label}-{dtype}"
            repeats = 1 if large else spec.suites.random_repeats
            for k in range(repeats):
                plan.calls.append(
                    Call(f"{base}-random-{k}", "random", "random", shape, dtype, _seed(), params())
                )
            # Determinism: the same inputs and seed twice must give identical bytes.
            iseed, cseed = _seed(), _call_seed()
            for role in ("a", "repeat"):
                plan.calls.append(
                    Call(
                        f"{base}-determinism-{role}",
                        "determinism",
                        "random",
                        shape,
                        dtype,
                        iseed,
                        params(seed=cseed),
                        group=f"{base}-det",
                        role=role,
                    )
                )
            for case in spec.suites.extreme:
                plan.calls.append(
                    Call(f"{base}-extreme-{case}", "extreme", case, shape, dtype, _seed(), params())
                )
            if st is None:
                continue
            plan.calls.append(
                Call(
                    f"{base}-stochastic-p0",
                    "stochastic",
                    st.case,
                    shape,
                    dtype,
                    _seed(),
                    params(0.0),
                )
            )
            # Every rate on the first shape; elsewhere the task's own rate (one mask check
            # per shape is what catches shape-dependent RNG indexing bugs).
            task_rate = float(spec.params.get(st.rate_param, st.rates[0]))
            rates = st.rates if si == 0 and not large else [task_rate]
            for rate in rates:
                iseed, s1, s2 = _seed(), _call_seed(), _call_seed()
                while s2 == s1:
                    s2 = _call_seed()
                grp = f"{base}-stochastic-p{rate:g}"
                for role, cs in (("a", s1), ("same_seed", s1), ("other_seed", s2)):
                    plan.calls.append(
                        Call(
                            f"{grp}-{role}",
                            "stochastic",
                            st.case,
                            shape,
                            dtype,
                            iseed,
                            params(rate, cs),
                            group=grp,
                            role=role,
                            rate=rate,
                        )
                    )
    # Numerical stress never depends on the dtypes a user selected: a kernel that is
    # fragile only where the input can carry a large mean/std ratio (one-pass variance
    # passed a bf16-only run on the H200, 2026-11-29, and fails fp32 large_offset) must
    # meet the extreme cases in every dtype of the task. They run on the smallest
    # selected shape, where they are cheap.
    omitted = [d for d in spec.dtypes if d not in dtypes]
    if omitted and shapes and spec.suites.extreme:
        small = min(shapes, key=_numel)
        for dtype in omitted:
            for case in spec.suites.extreme:
                plan.calls.append(
                    Call(
                        f"{small.label}-{dtype}-extreme-{case}",
                        "extreme",
                        case,
                        small,
                        dtype,
                        _seed(),
                        params(),
                    )
                )
    extra = unseen_shape(task, shapes) if unseen and shapes and dtypes else None
    if extra is not None:
        base = f"unseen-{extra.label}-{dtypes[0]}"
        plan.calls.append(
            Call(f"{base}-random-0", "random", "random", extra, dtypes[0], _seed(), params())
        )
        if st is not None:
            plan.calls.append(
                Call(
                    f"{base}-stochastic-p0",
                    "stochastic",
                    st.case,
                    extra,
                    dtypes[0],
                    _seed(),
                    params(0.0),
                )
            )
    return plan


def unseen_shape(task: Task, selected: list[Shape]) -> Shape | None:
    """A shape drawn per evaluation from the task's own ranges, odd where it can be.

    A candidate specialised to the listed shapes (hard-coded sizes, a block that only
    covers them) fails here. Only dimensions that vary across the task's shapes are
    drawn: a dimension every shape holds fixed (a head size, say) is part of the
    interface. Each is drawn log-uniformly between the task's smallest and largest
    value, keeping the element count within the largest selected shape's, so the
    evaluation costs no more than it already does. No drawn dimension takes a value any
    listed shape has: a candidate that special-cases the listed widths (a table of block
    sizes for 129, 1024, 8000, …) would pass on one of them (the range's ends are listed
    values, so a draw lands there now and then: CI saw it).
    """
    every = [*task.spec.shapes, *task.spec.cpu_shapes]
    names = list(selected[0].dims)
    if any(list(s.dims) != names for s in every):
        return None
    lo = {n: min(s.dims[n] for s in every) for n in names}
    hi = {n: max(s.dims[n] for s in every) for n in names}
    varying = [n for n in names if lo[n] < hi[n]]
    budget = max(_numel(s) for s in selected)
    listed = {n: {s.dims[n] for s in every} for n in names}
    known = {s.label for s in every}
    fallback = None  # where every value in range is listed: at least a combination no file names
    for _ in range(50):
        dims = {n: lo[n] for n in names}
        for n in _RNG.sample(varying, len(varying)):
            rest = _numel_of({k: v for k, v in dims.items() if k != n})
            top = min(hi[n], budget // max(rest, 1))
            if top < lo[n]:
                return None
            v = round(math.exp(_RNG.uniform(math.log(lo[n]), math.log(top))))
            dims[n] = min(v | 1, top) if v | 1 <= top else v
        shape = Shape(dims=dims, weight=1.0, tag="unseen")
        if all(dims[n] not in listed[n] for n in varying):
            return shape
        if fallback is None and shape.label not in known:
            fallback = shape
    return fallback


_RNG = secrets.SystemRandom()


def _numel_of(dims: dict[str, int]) -> int:
    n = 1
    for v in dims.values():
        n *= v
    return n


def _numel(shape: Shape) -> int:
    n = 1
    for v in shape.dims.values():
        n *= v
    return n
