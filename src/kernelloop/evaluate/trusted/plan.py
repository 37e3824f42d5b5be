"""Which calls a correctness evaluation makes: suites × cases × shapes × dtypes.

Every input seed and every call seed comes from a secret, fresh `secrets` draw per
evaluation, so a candidate cannot precompute or replay results.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import random
import secrets
from collections.abc import Callable
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
    stage: str = "full"  # one of STAGES
    # Count the kernels the call puts on the GPU (a CUDA C++ task's compile-stage calls:
    # its <<<>>> launches are invisible to Triton's launch hook): worker/op_audit.OpTrace.
    count_kernels: bool = False

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
        }


@dataclass
class Plan:
    calls: list[Call] = field(default_factory=list)

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

    def call_seed(self, name: str) -> int:
        return self._draw(f"call:{name}", 31)

    def rng(self, name: str) -> random.Random:
        """A generator for the plan's other secret choices (the unseen shape)."""
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
) -> Plan:
    """The calls of one evaluation, in stage order (`STAGES`); with `unseen`, plus a shape
    drawn now that no file names. `seeds`: the round's (default: fresh for this plan).
    `e2e_shapes`: the `[e2e]` model's shapes (Task.e2e_shapes), one call per shape and
    dtype it runs in, last."""
    spec = task.spec
    st = spec.stochastic
    seeds = seeds or Seeds()
    plan = Plan()
    rate_name = st.rate_param if st else None
    seed_name = st.seed_param if st else None

    def params(name: str, rate: float | None = None, seed: int | None = None) -> dict:
        p: dict = {}
        if rate_name is not None:
            p[rate_name] = 0.0 if rate is None else rate
        if seed_name is not None:
            p[seed_name] = seeds.call_seed(name) if seed is None else seed
        return p

    def add(
        cid: str, suite: str, case: str, shape: Shape, dtype: str, inputs: str = "", **kw
    ) -> None:
        """One call; `inputs` names the seed of its inputs (a group shares one)."""
        kw.setdefault("params", params(cid))
        seed = seeds.input_seed(inputs or cid)
        plan.calls.append(Call(cid, suite, case, shape, dtype, seed, **kw))

    for si, shape in enumerate(shapes):
        large = _numel(shape) > LARGE_NUMEL
        for dtype in dtypes:
            base = f"{shape.label}-{dtype}"
            repeats = 1 if large else spec.suites.random_repeats
            for k in range(repeats):
                add(f"{base}-random-{k}", "random", "random", shape, dtype)
            # Determinism: the same inputs and seed twice must give identical bytes.
            grp = f"{base}-det"
            for role in ("a", "repeat"):
                add(
                    f"{base}-determinism-{role}",
                    "determinism",
                    "random",
                    shape,
                    dtype,
                    inputs=grp,
                    params=params(grp, seed=seeds.call_seed(grp)),
                    group=grp,
                    role=role,
                )
            if st is None:
                continue
            cid = f"{base}-stochastic-p0"
            add(cid, "stochastic", st.case, shape, dtype, params=params(cid, 0.0))
            # Every rate on the first shape; elsewhere the task's own rate (one mask check
            # per shape is what catches shape-dependent RNG indexing bugs).
            task_rate = float(spec.params.get(st.rate_param, st.rates[0]))
            rates = st.rates if si == 0 and not large else [task_rate]
            for rate in rates:
                grp = f"{base}-stochastic-p{rate:g}"
                s1, s2 = seeds.call_seed(f"{grp}/1"), seeds.call_seed(f"{grp}/2")
                n = 2
                while s2 == s1:
                    n += 1
                    s2 = seeds.call_seed(f"{grp}/{n}")
                for role, cs in (("a", s1), ("same_seed", s1), ("other_seed", s2)):
                    add(
                        f"{grp}-{role}",
                        "stochastic",
                        st.case,
                        shape,
                        dtype,
                        inputs=grp,
                        params=params(grp, rate, cs),
                        group=grp,
                        role=role,
                        rate=rate,
                    )
    # Extreme values: their numerics depend on a row's length and values, not on how many
    # rows there are, so they run on every distinct row length with the fewest rows any
    # selected shape has (`suites.extreme_shrink`; docs/evaluate.md, "What each suite covers").
    ext_shapes = extreme_shapes(task, shapes)
    for shape in ext_shapes:
        for dtype in dtypes:
            for case in spec.suites.extreme_cases:
                add(f"{shape.label}-{dtype}-extreme-{case}", "extreme", case, shape, dtype)
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
                add(f"{small.label}-{dtype}-extreme-{case}", "extreme", case, small, dtype)
    extra = (
        unseen_shape(task, shapes, seeds.rng("unseen"), accepts=task.accepts)
        if unseen and shapes and dtypes
        else None
    )
    if extra is not None:
        base = f"unseen-{extra.label}-{dtypes[0]}"
        add(f"{base}-random-0", "random", "random", extra, dtypes[0])
        if st is not None:
            cid = f"{base}-stochastic-p0"
            add(cid, "stochastic", st.case, extra, dtypes[0], params=params(cid, 0.0))
    _stage(plan, shapes)
    for shape in e2e_shapes or []:
        for dtype in task.e2e_dtypes(dtypes):
            cid = f"e2e-{shape.label}-{dtype}"
            # Dropout off: the model's output is then a deterministic function of its
            # inputs, compared against the float64 model (docs/task.md, "End-to-end").
            p = {**params(cid, 0.0), **(spec.e2e.params if spec.e2e else {})}
            if rate_name is not None:
                p[rate_name] = 0.0
            add(cid, "e2e", "model", shape, dtype, params=p, audit=False, stage="e2e")
    return plan


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

    def rank(c: Call) -> tuple:
        return (order[c.stage], c.suite != "extreme", _numel(c.shape))

    plan.calls.sort(key=rank)  # stable: a group's calls keep their order


def unseen_shape(
    task: Task,
    selected: list[Shape],
    rng: random.Random | None = None,
    accepts: Callable[[dict[str, int]], bool] | None = None,
) -> Shape | None:
    """A shape drawn per evaluation from the task's own ranges, odd where it can be.

    A candidate specialised to the listed shapes (hard-coded sizes, a block that only
    covers them) fails here. Only dimensions that vary across the task's shapes are
    drawn: a dimension every shape holds fixed (a head size, say) is part of the
    interface. Each is drawn log-uniformly between the task's smallest and largest
    value, keeping the element count within the largest selected shape's, so the
    evaluation costs no more than it already does. No drawn dimension takes a value any
    listed shape has: a candidate that special-cases the listed widths (a table of block
    sizes for 129, 1024, 8000, …) would pass on one of them (the range's ends are listed
    values, so a draw lands there now and then: CI saw it). A draw the task does not
    accept (`accepts`: an imported KernelBench problem whose sizes must divide each other)
    is drawn again; none accepted in 50 draws gives no unseen shape.
    """
    every = [*task.spec.shapes, *task.spec.cpu_shapes]
    ranges = unseen_ranges(task, selected)
    if ranges is None:
        return None
    names = list(selected[0].dims)
    lo = {n: min(s.dims[n] for s in every) for n in names}
    hi = {n: max(s.dims[n] for s in every) for n in names}
    varying = list(ranges)
    budget = max(_numel(s) for s in selected)
    listed = {n: {s.dims[n] for s in every} for n in names}
    known = {s.label for s in every}
    rng = rng or _RNG
    fallback = None  # where every value in range is listed: at least a combination no file names
    for _ in range(50):
        dims = {n: lo[n] for n in names}
        for n in rng.sample(varying, len(varying)):
            rest = _numel_of({k: v for k, v in dims.items() if k != n})
            top = min(hi[n], budget // max(rest, 1))
            if top < lo[n]:
                return None
            v = round(math.exp(rng.uniform(math.log(lo[n]), math.log(top))))
            dims[n] = min(v | 1, top) if v | 1 <= top else v
        shape = Shape(dims=dims, weight=1.0, tag="unseen")
        if accepts is not None and not accepts(dims):
            continue
        if all(dims[n] not in listed[n] for n in varying):
            return shape
        if fallback is None and shape.label not in known:
            fallback = shape
    return fallback


def unseen_ranges(task: Task, selected: list[Shape]) -> dict[str, tuple[int, int]] | None:
    """The dimensions `unseen_shape` draws and the range of each (the task's smallest and
    largest value over every listed shape); None where it draws no shape. The agent's
    brief quotes these (loop/context.py), so it follows any change made here."""
    every = [*task.spec.shapes, *task.spec.cpu_shapes]
    if not selected:
        return None
    names = list(selected[0].dims)
    if any(list(s.dims) != names for s in every):
        return None
    lo = {n: min(s.dims[n] for s in every) for n in names}
    hi = {n: max(s.dims[n] for s in every) for n in names}
    return {n: (lo[n], hi[n]) for n in names if lo[n] < hi[n]}


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
