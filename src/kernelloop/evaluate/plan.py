"""Which calls a correctness evaluation makes: suites × cases × shapes × dtypes.

Every input seed and every call seed comes from a secret, fresh `secrets` draw per
evaluation, so a candidate cannot precompute or replay results.
"""

from __future__ import annotations

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
    audit: bool = False

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


def plan_calls(task: Task, shapes: list[Shape], dtypes: list[str]) -> Plan:
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

    first = True
    for si, shape in enumerate(shapes):
        large = _numel(shape) > LARGE_NUMEL
        for dtype in dtypes:
            base = f"{shape.label}-{dtype}"
            repeats = 1 if large else spec.suites.random_repeats
            for k in range(repeats):
                plan.calls.append(
                    Call(f"{base}-random-{k}", "random", "random", shape, dtype, _seed(), params(), audit=first)
                )
                first = False
            # Determinism: the same inputs and seed twice must give identical bytes.
            iseed, cseed = _seed(), _call_seed()
            for role in ("a", "repeat"):
                plan.calls.append(
                    Call(f"{base}-determinism-{role}", "determinism", "random", shape, dtype, iseed,
                         params(seed=cseed), group=f"{base}-det", role=role)
                )
            for case in spec.suites.extreme:
                plan.calls.append(Call(f"{base}-extreme-{case}", "extreme", case, shape, dtype, _seed(), params()))
            if st is None:
                continue
            plan.calls.append(Call(f"{base}-stochastic-p0", "stochastic", st.case, shape, dtype, _seed(), params(0.0)))
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
                        Call(f"{grp}-{role}", "stochastic", st.case, shape, dtype, iseed, params(rate, cs),
                             group=grp, role=role, rate=rate)
                    )
    return plan


def _numel(shape: Shape) -> int:
    n = 1
    for v in shape.dims.values():
        n *= v
    return n
