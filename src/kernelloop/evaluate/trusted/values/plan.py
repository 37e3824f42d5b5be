"""Which calls a correctness evaluation makes: suites × cases × shapes × dtypes.

Every input seed and every call seed comes from a secret, fresh `secrets` draw per
evaluation, so a candidate cannot precompute or replay results.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import secrets
from dataclasses import dataclass, field

from kernelloop.evaluate.trusted.values.seed_values import (
    stochastic_groups,
    user_seed,
)
from kernelloop.evaluate.trusted.values.undeclared import (  # noqa: F401
    draws,
    undeclared_shapes,
    unseen_shape,
)
from kernelloop.task import Shape, Task
from kernelloop.task.domain import Sampler

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
    role: str = ""  # "a", "same_seed", "other_seed", "refill", "repeat"
    relation: str = ""  # an other_seed call's seed, in words ("seed + 1"; seed_values.py)
    rate: float = 0.0
    # Every call runs under the aten-op recorder: auditing only the first let a
    # candidate be honest once and call PyTorch afterwards.
    audit: bool = True
    stage: str = "full"  # one of STAGES
    # Count the kernels the call puts on the GPU (a CUDA C++ task's compile-stage calls:
    # its <<<>>> launches are invisible to Triton's launch hook): worker/op_audit.OpTrace.
    count_kernels: bool = False
    # The late seed check (launch/late.py): this many calls of `late_numel` elements run in
    # the worker right before this one, inside its deadline (values/deadline.py).
    late_burn: int = 0
    late_numel: int = 0

    def to_job(self) -> dict:
        return {
            "id": self.id,
            "dims": self.shape.dims,
            "dtype": self.dtype,
            "case": self.case,
            "input_seed": self.input_seed,
            "params": self.params,
            "audit": self.audit,
            **({"e2e": True} if self.suite == "e2e" else {}),
            **({"count_kernels": True} if self.count_kernels else {}),
            # The worker keeps a determinism group's first inputs and refills those same
            # tensors for its `refill` call (worker/main.run_call).
            **({"keep_inputs": True} if self.suite == "determinism" and self.role == "a" else {}),
            **({"refill": True} if self.role == "refill" else {}),
        }


@dataclass
class Plan:
    calls: list[Call] = field(default_factory=list)
    note: str = ""  # what the verdict adds (big_shape.Big.note: a shape past 2³¹ elements)

    def by_id(self) -> dict[str, Call]:
        return {c.id: c for c in self.calls}


class Seeds:
    """Where a plan's secret seeds come from: a 256-bit key drawn from `secrets`, each seed
    an HMAC-SHA256 of the call's name under it. A fresh `Seeds()` per evaluation is as
    unpredictable as independent draws; one `Seeds` shared by the candidates of a round
    gives them the same inputs (a worker only ever sees its own), so the trusted side can
    compute each reference once per round (`refcache.py`). A new round, a new key."""

    def __init__(self, key: bytes | None = None) -> None:
        self.key = key if key is not None else secrets.token_bytes(32)
        self.id = hashlib.sha256(b"kernelloop-seeds:" + self.key).hexdigest()[:16]

    def _draw(self, name: str, bits: int) -> int:
        digest = hmac.new(self.key, name.encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:8], "big") >> (64 - bits)

    def input_seed(self, name: str) -> int:
        return self._draw(f"input:{name}", 62)

    def call_seed(self, name: str, family: str | None = None) -> int:
        """A call's seed as people pass them (`seed_values.user_seed`): its family (small,
        a step counter, 31/32/63-bit) drawn from the name unless given."""
        return user_seed(self._draw(f"call:{name}", 63), family)

    def rng(self, name: str) -> random.Random:
        """A generator for the plan's other secret choices (the undeclared shapes)."""
        return random.Random(self._draw(f"rng:{name}", 62))


# The order calls run in: cheapest first, and the trusted side stops the worker at the
# first failure, so a broken candidate costs only the stages before it fails.
# `e2e` (the task's `[e2e]` model, docs/task.md) comes last: only a candidate that passed
# every per-op check gets there, and every candidate that can become the best passes it.
STAGES = ("compile", "smoke", "full", "e2e")


def plan_calls(
    task: Task,
    shapes: list[Shape],
    dtypes: list[str],
    *,
    unseen: bool = True,
    seeds: Seeds | None = None,
    e2e_shapes: list[Shape] | None = None,
    big=None,
) -> Plan:
    """The calls of one evaluation, in stage order (`STAGES`); with `unseen`, plus the
    undeclared shapes drawn now (undeclared.py). `seeds`: the round's (default: fresh
    for this plan).
    `e2e_shapes`: the `[e2e]` model's shapes (Task.e2e_shapes), one call per shape and
    dtype it runs in, last. `big`: a GPU's shape past 2³¹ elements (big_shape.Big), or None."""
    spec = task.spec
    st = spec.stochastic
    seeds = seeds or Seeds()
    plan = Plan()
    rate_name = st.rate_param if st else None
    seed_name = st.seed_param if st else None
    # The rate the op is used (and timed) at: a stochastic task's random, determinism and
    # half its extreme calls run with it, on the same random inputs as the timed calls, so
    # no check is recognisable by its rate or its inputs (issue 33: every check at p = 0
    # but one residual-free case let a kernel be wrong exactly where the op is used).
    used = used_rate(task)

    sampler = Sampler(spec.domain, spec.params, seeds.rng)

    def params(
        name: str,
        rate: float | None = None,
        seed: int | None = None,
        stratum: str | None = "random",
    ) -> dict:
        # The declared scalars (eps, ...) drawn from their real-use domain per call or group
        # (task/domain.py), in strata by case; `stratum=None`: the task's own values (e2e
        # calls, sized at them, and the extreme cases of `[suites] at_params`).
        p: dict = sampler.params(name, stratum) if stratum is not None else {}
        if rate_name is not None:
            p[rate_name] = 0.0 if rate is None else rate
        if seed_name is not None:
            p[seed_name] = seeds.call_seed(name) if seed is None else seed
        return p

    def add(
        cid: str, suite: str, case: str, shape: Shape, dtype: str, inputs: str = "", **kw
    ) -> None:
        """One call; `inputs` names the seed of its inputs (a group shares one)."""
        if "params" not in kw:  # not drawn where given: a draw advances its stratum
            kw["params"] = params(cid)
        seed = seeds.input_seed(inputs or cid)
        plan.calls.append(Call(cid, suite, case, shape, dtype, seed, **kw))

    for shape in shapes:
        large = _numel(shape) > LARGE_NUMEL
        for dtype in dtypes:
            base = f"{shape.label}-{dtype}"
            repeats = 1 if large else spec.suites.random_repeats
            for k in range(repeats):
                cid, rate = f"{base}-random-{k}", used if k % 2 == 0 else 0.0
                add(cid, "random", "random", shape, dtype, params=params(cid, rate), rate=rate)
            # Determinism and state (judge_state.py): `a`; `refill`, right after it, in the
            # same input buffers holding new values, with the same seed (a kernel that
            # caches its output by input address, shape or seed returns a's); `repeat`,
            # a's inputs and seed again, run last and across shapes in reverse order
            # (`_stage`): identical bytes to a's, whatever ran in between.
            grp = f"{base}-det"
            for role in ("a", "refill", "repeat"):
                add(
                    f"{base}-determinism-{role}",
                    "determinism",
                    "random",
                    shape,
                    dtype,
                    inputs=f"{grp}/refill" if role == "refill" else grp,
                    params=params(grp, rate=used, seed=seeds.call_seed(grp)),
                    group=grp,
                    role=role,
                    rate=used,
                )
            if st is None:
                continue
            cid = f"{base}-stochastic-p0"
            add(cid, "stochastic", "random", shape, dtype, params=params(cid, 0.0))
    # The stochastic groups (seed_values.stochastic_groups): rates drawn over [0.01, 0.95) for
    # this evaluation, always 0.1, 0.2, 0.3, the task's and one in [0.1, 0.5), spread over
    # the shapes and dtypes; each group's seed from a family people pass (small, a step
    # counter, 31/32/63-bit), its other seed a relative (+1, -1, one bit, +2^16, fresh).
    if st is not None:
        slots = [(s, d, _numel(s) > LARGE_NUMEL) for s in shapes for d in dtypes]
        for shape, dtype, j, g in stochastic_groups(task, slots, seeds, used):
            grp = f"{shape.label}-{dtype}-stochastic-{j}-p{g.rate:g}"
            for role, cs in (("a", g.seed), ("same_seed", g.seed), ("other_seed", g.other)):
                add(
                    f"{grp}-{role}",
                    "stochastic",
                    "random",
                    shape,
                    dtype,
                    inputs=grp,
                    params=params(grp, g.rate, cs),
                    group=grp,
                    role=role,
                    rate=g.rate,
                    relation=g.relation if role == "other_seed" else "",
                )
    # Extreme values: their numerics depend on a row's length and values, not on how many
    # rows there are, so they run on every distinct row length with the fewest rows any
    # selected shape has (`suites.extreme_shrink`; docs/evaluate.md, "What each suite covers").
    ext_shapes = extreme_shapes(task, shapes)
    extreme: list[tuple[Shape, str, str]] = []
    for shape in ext_shapes:
        for dtype in dtypes:
            for case in spec.suites.extreme_cases:
                extreme.append((shape, dtype, case))
    # Numerical stress never depends on the dtypes a user selected: a kernel that is
    # fragile only where the input can carry a large mean/std ratio (one-pass variance
    # passed a bf16-only run on the H200, 2026-11-29, and fails fp32 large_offset) must
    # meet the extreme cases in every dtype of the task. They run on the smallest
    # extreme shape, where they are cheap.
    omitted = [d for d in spec.dtypes if d not in dtypes]
    if omitted and ext_shapes and spec.suites.extreme_cases:
        small = min(ext_shapes, key=_numel)
        for dtype in omitted:
            for case in spec.suites.extreme_cases:
                extreme.append((small, dtype, case))
    for shape, dtype, case, rate in _extreme_rates(extreme, used, seeds):
        cid = f"{shape.label}-{dtype}-extreme-{case}" + (f"-p{rate:g}" if rate else "")
        stratum = None if case in spec.suites.at_params else f"extreme:{case}"
        add(cid, "extreme", case, shape, dtype, params=params(cid, rate, None, stratum), rate=rate)
    # Undeclared shapes (undeclared.py): drawn now from the secret seeds, no file names
    # them, each in a dtype drawn too; none where the task declares its shapes closed.
    # The reach shapes (up to each dim's declared maximum) get one call each, at the used rate.
    rng = seeds.rng("unseen")
    drawn, reach = draws(task, shapes, rng, accepts=task.accepts) if unseen and dtypes else ([], [])
    for k, extra in enumerate([*drawn, *reach]):
        dtype = rng.choice(dtypes)
        base = f"undeclared-{extra.label}-{dtype}"
        cid = f"{base}-random-0"
        add(cid, "random", "random", extra, dtype, params=params(cid, used), rate=used)
        # The tile shape (the first) gets one call: past 128 rows an interpreted call costs
        # ~3 s on the CPU.
        if st is not None and k < len(drawn) and (k > 0 or len(drawn) == 1):
            cid = f"{base}-stochastic-p0"
            add(cid, "stochastic", "random", extra, dtype, params=params(cid, 0.0))
    if big is not None and big.shape is not None:  # past 2³¹ elements (big_shape.py), p = 0
        cid = f"undeclared-{big.shape.label}-{big.dtype}-random-0"
        add(cid, "random", "random", big.shape, big.dtype, params=params(cid, 0.0))
    plan.note = big.note if big is not None else ""
    _stage(plan, shapes)
    for shape in e2e_shapes or []:
        for dtype in task.e2e_dtypes(dtypes):
            cid = f"e2e-{shape.label}-{dtype}"
            # Dropout off: the model's output is then a deterministic function of its
            # inputs, compared against the float64 model (docs/task.md, "End-to-end").
            p = {**params(cid, 0.0, None, None), **(spec.e2e.params if spec.e2e else {})}
            if rate_name is not None:
                p[rate_name] = 0.0
            add(cid, "e2e", "model", shape, dtype, params=p, audit=False, stage="e2e")
    return plan


def used_rate(task: Task) -> float:
    """The rate a stochastic task's op is used and timed at (its `[params]` value, else
    its first checked rate); 0.0 for a task without randomness."""
    st = task.spec.stochastic
    if st is None:
        return 0.0
    rate = float(task.spec.params.get(st.rate_param, 0.0))
    return rate if rate > 0 else max(st.rates, default=0.0)


def _extreme_rates(
    calls: list[tuple[Shape, str, str]], used: float, seeds: Seeds
) -> list[tuple[Shape, str, str, float]]:
    """Each extreme (shape, dtype, case) with its rate: with randomness, every case runs
    at p = 0 (an exact comparison) on half its shape/dtype pairs and at the used rate
    (kept or dropped element by element) on the other half, which half drawn per
    evaluation; a case with a single pair runs at both. Without, every call at 0."""
    if used <= 0:
        return [(*c, 0.0) for c in calls]
    flip = seeds.rng("extreme-rates").getrandbits(1)
    by_case: dict[str, list[tuple[Shape, str, str]]] = {}
    for c in calls:
        by_case.setdefault(c[2], []).append(c)
    out = []
    for c in calls:
        mine = by_case[c[2]]
        if len(mine) == 1:
            out += [(*c, 0.0), (*c, used)]
        else:
            out.append((*c, used if (mine.index(c) + flip) % 2 == 0 else 0.0))
    return out


def extreme_shapes(task: Task, shapes: list[Shape]) -> list[Shape]:
    """The extreme suite's shapes: each selected shape with the `extreme_shrink` dimensions
    set to the smallest value any selected shape has, duplicates dropped, smallest first."""
    shrink = [d for d in task.spec.suites.extreme_shrink if shapes and d in shapes[0].dims]
    if not shrink:
        return list(shapes)
    low = {d: min(s.dims.get(d, 1) for s in shapes) for d in shrink}
    out: dict[str, Shape] = {}
    for s in shapes:
        dims = {k: (low[k] if k in low else v) for k, v in s.dims.items()}
        shape = s if dims == s.dims else Shape(dims=dims, weight=s.weight, tag="extreme")
        out.setdefault(shape.label, shape)
    return sorted(out.values(), key=_numel)


def count_kernels(plan: Plan, device: str, language: str) -> None:
    """Mark the calls whose GPU kernels the worker counts in its trace: a CUDA C++ task's
    compile-stage calls (one per dtype) on a GPU, whose <<<>>> launches Triton's launch hook
    cannot see; the record's launches per call is their largest count."""
    for c in plan.calls:
        c.count_kernels = device == "cuda" and language == "cuda" and c.stage == "compile"


def _stage(plan: Plan, shapes: list[Shape]) -> None:
    """Label every call with its stage and put the plan in stage order, cheapest first:
    - compile: one random call per dtype on the smallest selected shape (the candidate's
      kernels compile for every dtype before anything expensive runs);
    - smoke: every extreme case on the smallest extreme shape, every dtype (numerics
      failures cost a few small calls: the one-pass variance kernel fails here), then the
      random-input calls (random, determinism) and the stochastic ones on one mid-size
      shape, every dtype;
    - full: everything else (extreme cases first: their shapes are small), by size.
    Calls of one group (determinism, a stochastic rate) keep their order."""
    if not plan.calls or not shapes:
        return
    by_size = sorted(shapes, key=_numel)
    small, mid = by_size[0].label, by_size[len(by_size) // 2].label
    extreme = [c.shape for c in plan.calls if c.suite == "extreme"]
    tiny = min(extreme, key=_numel).label if extreme else None
    first: set[str] = set()
    for c in plan.calls:
        key = (c.dtype, c.suite)
        if c.suite == "random" and c.shape.label == small and key not in first:
            first.add(key)
            c.stage = "compile"
        elif c.shape.label == mid and c.suite in ("random", "determinism", "stochastic"):
            c.stage = "smoke"
        elif c.suite == "extreme" and c.shape.label == tiny:
            c.stage = "smoke"
    order = {name: i for i, name in enumerate(STAGES)}
    for c in plan.calls:
        if c.role == "repeat" and c.suite == "determinism":
            c.stage = "full"  # last, largest shape first: the first calls ran smallest first

    def rank(c: Call) -> tuple:
        if c.role == "repeat" and c.suite == "determinism":
            return (order[c.stage], 2, -_numel(c.shape))
        return (order[c.stage], 0 if c.suite == "extreme" else 1, _numel(c.shape))

    plan.calls.sort(key=rank)  # stable: a group's calls keep their order


def _numel(shape: Shape) -> int:
    n = 1
    for v in shape.dims.values():
        n *= v
    return n
