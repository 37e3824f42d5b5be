"""Which regions of the output the task's inputs make informative (issue 45).

An output element carries information in a case when its float64 reference differs between
input draws of that case by more than the tolerance: there, a kernel that computed nothing
(or read nothing) would be caught. An element the reference drives to the same value on
every draw is judged against a constant: KernelBench's cumprod of `torch.rand` inputs
reaches 0 within a few dozen columns, so a kernel that reads only the first 1024 columns
is accepted there. Each region of the output — the rows and the columns of its last
dimension, the output seen as rows × columns — must be informative in at least one case
(random or an extreme one) on some shape; where a run of rows or columns never is, the
task's inputs are too weak there and the report names it: "at 3x4000: columns ≥ 37 never
informative".

The reference runs on the trusted side as the judge runs it (`Judge.value_refs`), on the
task's CPU shapes (its GPU ones where it has none), at rate 0 (a dropout's mask is noise,
not information about the op), in the dtype whose tolerance is tightest, on DRAWS fixed
input seeds per case: the report is the same on every run. Informative = any draw differs
from the first beyond `atol + rtol·|first|` (torch.isclose, non-finite values equal to
themselves).

A run found dead is excused where every element of it is the same under WILD draws too —
every floating input and parameter replaced by normal values of any sign at scales 1 and
10³ — as it is under the cases: such an element is constant whatever the input (a
transposed convolution's stride gaps: KernelBench level1/77 leaves 7 of 8 outputs at 0),
so a kernel must write that constant and one that does not is caught. A saturated
element (a ReLU column the cases keep negative) moves under the wild draws and stays
named; so do cumprod's dead columns (they overflow at 10³).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.plan import Call
from kernelloop.task import Shape, Task

DRAWS = 3  # input draws per case: two equal by chance is unlikely, three all equal less so
SEEDS = (0x5EED0, 0x5EED1, 0x5EED2)
WILD = ((0x3117D0, 1.0), (0x3117D1, 1e3), (0x3117D2, 1e3))  # (seed, scale) of each wild draw
BUDGET_S = 60.0  # the report stops checking further shapes past this (an imported CNN's refs)
NAMED = 2  # dead runs named per axis and shape; the rest counted
# A shape whose dims multiply past this is not checked here (the references run in float64
# on this machine's CPU: a GPU shape of 32768² is 8 GiB a tensor).
MAX_NUMEL = 1 << 22


@dataclass(frozen=True)
class Dead:
    """A run of rows or columns of one shape's output that no case makes informative."""

    shape: str
    output: int  # which output of the reference (0 for a single one)
    axis: str  # "rows" or "columns"
    lo: int
    hi: int  # exclusive
    size: int  # the axis's length

    def words(self) -> str:
        if self.hi >= self.size and self.lo > 0:
            span = f"{self.axis} ≥ {self.lo}"
        elif self.lo == 0 and self.hi >= self.size:
            span = f"every one of the {self.size} {self.axis}"
        elif self.hi - self.lo == 1:
            span = f"{self.axis[:-1]} {self.lo}"
        else:
            span = f"{self.axis} {self.lo}–{self.hi - 1}"
        part = f" (output {self.output})" if self.output else ""
        return f"at {self.shape}{part}: {span} never informative"


@dataclass
class Regions:
    dead: list[Dead]
    checked: list[str]  # the shapes checked
    cases: list[str]
    dtype: str
    skipped: str = ""  # why some shapes or all went unchecked

    def line(self) -> str | None:
        """One sentence for a report, None where every region is informative."""
        if not self.dead:
            return None
        named = [d.words() for d in self.dead[: NAMED * 2]]
        more = len(self.dead) - len(named)
        return (
            "the task's inputs are too weak: "
            + "; ".join(named)
            + (f" (and {more} more)" if more > 0 else "")
            + f" — the float64 reference is the same on every draw of every case "
            f"({', '.join(self.cases)}; {self.dtype} tolerance), so a kernel wrong there is "
            "accepted; add an input case whose output varies there"
        )


def informative_regions(
    task: Task, shapes: list[Shape] | None = None, budget_s: float = BUDGET_S
) -> Regions:
    """The dead regions of the task's output on `shapes` (default: its CPU shapes)."""
    shapes = shapes or list(task.spec.cpu_shapes or task.spec.shapes)
    spec = task.spec
    dtype = min(spec.dtypes, key=lambda d: (spec.tolerances[d].atol, spec.tolerances[d].rtol))
    cases = ["random", *spec.suites.extreme_cases]
    judge = Judge(task, "cpu")
    out = Regions(dead=[], checked=[], cases=cases, dtype=dtype)
    deadline = time.monotonic() + budget_s
    for shape in shapes:
        if time.monotonic() > deadline:
            out.skipped = f"not checked past {budget_s:g} s: {shape.label} and after"
            break
        live: dict[int, list[torch.Tensor]] = {}  # output -> [rows_any, cols_any]
        for case in cases:
            refs = [_refs(judge, task, shape, dtype, case, s) for s in SEEDS[:DRAWS]]
            for k, first in enumerate(refs[0]):
                tol = judge.tolerance(_call(task, shape, dtype, case, 0), first, own=False)
                moved = torch.zeros(_grid(first), dtype=torch.bool)
                for other in refs[1:]:
                    same = torch.isclose(
                        other[k].double(),
                        first.double(),
                        rtol=tol.rtol,
                        atol=tol.atol,
                        equal_nan=True,
                    )
                    moved |= ~same.reshape(moved.shape)
                rows, cols = moved.any(dim=1), moved.any(dim=0)
                if k in live:
                    live[k][0] |= rows
                    live[k][1] |= cols
                else:
                    live[k] = [rows, cols]
        out.checked.append(shape.label)
        if any(not (r.all() and c.all()) for r, c in live.values()):
            for k, fixed in _constant(judge, task, shape, dtype).items():
                live[k][0] |= fixed.all(dim=1)
                live[k][1] |= fixed.all(dim=0)
        for k, (rows, cols) in live.items():
            for axis, flags in (("rows", rows), ("columns", cols)):
                out.dead += [
                    Dead(shape.label, k, axis, lo, hi, len(flags)) for lo, hi in _runs(flags)
                ]
    return out


def report_line(task: Task, device: str = "cpu") -> str:
    """The report's line for `task show`, the importer and gate-check: why the task's
    inputs are too weak, or "" where every region is informative. On the CPU its CPU
    shapes; on a GPU its GPU shapes too — each where it holds at most MAX_NUMEL elements
    (said where one does not); nothing for a task whose inputs fail to build here."""
    shapes = list(task.spec.cpu_shapes or task.spec.shapes)
    if device != "cpu":
        shapes += [s for s in task.spec.shapes if s not in shapes]
    fit = [s for s in shapes if s.numel <= MAX_NUMEL]
    if not fit:
        return ""
    try:
        regions = informative_regions(task, fit)
    except Exception:  # noqa: BLE001 - the task's own code; evaluate says what it is
        return ""
    line = regions.line() or ""
    left = [s.label for s in shapes if s not in fit]
    if line and left:
        line += f" (not checked here, too large for this CPU: {', '.join(left)})"
    return line


def _call(task: Task, shape: Shape, dtype: str, case: str, seed: int) -> Call:
    st = task.spec.stochastic
    params = {st.rate_param: 0.0, st.seed_param: 1} if st is not None else {}
    return Call(f"regions-{shape.label}-{case}-{seed}", "random", case, shape, dtype, seed, params)


def _refs(judge: Judge, task: Task, shape: Shape, dtype: str, case: str, seed: int, inputs=None):
    """The call's float64 reference(s), in output order; on `inputs` where given (the
    judge here has no reference cache: its key names the call, not other inputs)."""
    refs = judge.value_refs(_call(task, shape, dtype, case, seed), inputs)
    keys = ["ref"] if "ref" in refs else sorted(refs, key=lambda k: int(k.split(".")[1]))
    return [refs[k].detach().cpu() for k in keys]


def _constant(judge: Judge, task: Task, shape: Shape, dtype: str) -> dict[int, torch.Tensor]:
    """Output -> the elements (as rows × columns) whose reference under every WILD draw
    equals the random case's first draw's (module docstring)."""
    call = _call(task, shape, dtype, "random", SEEDS[0])
    firsts = _refs(judge, task, shape, dtype, "random", SEEDS[0])
    fixed = {k: torch.ones(_grid(f), dtype=torch.bool) for k, f in enumerate(firsts)}
    given = judge._inputs(call)  # their shapes, dtypes and the non-floating ones
    for seed, scale in WILD:
        g = torch.Generator().manual_seed(seed)
        inputs = {
            name: (torch.randn(v.shape, generator=g, dtype=v.dtype) * scale).to(v.device)
            if isinstance(v, torch.Tensor) and v.is_floating_point()
            else v
            for name, v in given.items()
        }
        wilds = _refs(judge, task, shape, dtype, "random", SEEDS[0], inputs)
        for k, (wild, first) in enumerate(zip(wilds, firsts, strict=True)):
            wild, first = wild.double(), first.double()
            tol = judge.tolerance(call, first, own=False)
            same = torch.isclose(wild, first, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
            fixed[k] &= same.reshape(fixed[k].shape)
    return fixed


def _grid(t: torch.Tensor) -> tuple[int, int]:
    """The output seen as rows × columns: its last dimension the columns."""
    if t.dim() == 0:
        return (1, 1)
    return (t.numel() // max(t.shape[-1], 1), t.shape[-1])


def _runs(flags: torch.Tensor) -> list[tuple[int, int]]:
    """[lo, hi) of each run of False in `flags`."""
    runs, start = [], None
    for i, v in enumerate(flags.tolist()):
        if not v and start is None:
            start = i
        elif v and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(flags)))
    return runs
