"""Sizes for an imported KernelBench problem: which of its integer constants size a tensor,
and the scaled-down CPU shapes (every tensor small, the problem still valid there and its
output not made constant by the scaling)."""

from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path

import torch

from kernelloop.task.draws import global_rng, seeded
from kernelloop.task.kernelbench_inputs import CASES, _state, load_problem


def tensor_sizes(
    path: Path, dims: dict[str, int], forward: bool = True, strict: bool = False
) -> tuple[list[tuple[str, list[int], bool]], int]:
    """(every tensor's (role, shape, floating) with the output last, its largest numel), by
    running the problem on the meta device (`forward=False`: inputs and weights only — a
    recurrent model's meta forward steps through every time step in Python: 23 s for
    KernelBench level3/41's GRU at its own size)."""
    mod = load_problem(path, dims)
    model = meta_model(mod.Model, mod.get_init_inputs())
    with torch.device("meta"):
        args = list(mod.get_inputs())
        tensors = [("input", a) for a in args if isinstance(a, torch.Tensor)]
        tensors += [("state", t) for _, t in _state(model)]
        out = None
        if forward:
            try:
                out = model(*args)
            except NotImplementedError:  # an op without a meta kernel: no output bytes
                out = None
            except Exception:  # noqa: BLE001 - the problem refuses these sizes
                if strict:
                    raise
                out = None
    if isinstance(out, torch.Tensor):
        tensors.append(("output", out))
    rows = [(role, list(t.shape), t.is_floating_point()) for role, t in tensors]
    return rows, max((t.numel() for _, t in tensors), default=0)


def meta_model(cls, init) -> torch.nn.Module:
    """`cls(*init)` on the meta device (structure and shapes, no memory). A constructor that
    reads tensor values (Swin's stochastic-depth rates: `x.item()` of a linspace) cannot run
    there: it is built on the CPU and then moved to meta."""
    try:
        with torch.device("meta"):
            return cls(*init)
    except RuntimeError as e:
        if "meta" not in str(e):
            raise
        return cls(*init).to("meta")


def shape_dims(path: Path, dims: dict[str, int]) -> dict[str, int]:
    """The sizes that size a tensor (an input or a weight): a constant that only configures
    the model (GroupNorm's num_groups = 128) reaches the judge's Model through
    get_init_inputs as the number it was at import, whatever a shape says, so varying it
    would describe shapes that are never run (and unseen shapes that fail). Kept fixed.
    So is a constant that changes how many tensors there are, not their sizes (ResNet101's
    23 blocks in layer3, KernelBench level3/10): the task's weights are named at import,
    and a model with fewer blocks at a CPU shape had none of layer3_14's."""
    base, _ = tensor_sizes(path, dims, forward=False)
    kept = {}
    for k, v in dims.items():
        try:
            moved, _ = tensor_sizes(path, {**dims, k: v * 2}, forward=False)
        except Exception:  # noqa: BLE001 - the problem refuses it: it matters
            moved = None
        if moved is not None and len(moved) != len(base):
            continue
        if moved != base:
            kept[k] = v
    return kept or dims


def sizes_ok(path: Path, dims: dict[str, int]) -> bool:
    """Whether the problem at `path` builds its inputs and Model at `dims` and runs its
    forward there (on the meta device: no memory; an op without a meta kernel passes)."""
    try:
        tensor_sizes(path, dims, forward=True, strict=True)
    except Exception:  # noqa: BLE001 - the problem's own check of its sizes
        return False
    return True


def scaled(path: Path, dims: dict[str, int], budget: int) -> dict[str, int]:
    """`dims` with the largest one halved until no tensor has more than `budget` elements:
    first by the inputs and weights alone (cheap), then with the output too (one forward
    on the meta device per further step, usually none). A halving the problem refuses
    (num_channels no longer divisible by num_groups, a kernel larger than its input) is
    undone and that size kept; the next largest is halved instead. When the sizes the
    cheap pass reached already fail the forward, it runs again with the forward checked
    at every step."""
    try:
        return _halved(path, dims, budget, (False, True))
    except Exception:  # noqa: BLE001 - the cheap pass went too far: check every step
        return _halved(path, dims, budget, (True,))


def _halved(
    path: Path, dims: dict[str, int], budget: int, passes: tuple[bool, ...]
) -> dict[str, int]:
    cur = dict(dims)
    kept: set[str] = set()
    last: tuple[str, int] | None = None  # the halving just made: (name, value before)
    for forward in passes:
        for _ in range(400):
            try:
                _, largest = tensor_sizes(path, cur, forward=forward, strict=forward)
            except Exception:  # noqa: BLE001 - the problem's own check of its sizes
                if last is None:
                    raise
                cur[last[0]] = last[1]
                kept.add(last[0])
                last = None
                continue
            if largest <= budget:
                break
            free = [k for k in cur if k not in kept and cur[k] > 2]
            if not free:
                # Sizes that must move together (a loss whose two inputs broadcast): all
                # halved at once, or none.
                # Nothing left to halve ends this pass, never the forward-checked one
                # (a weight larger than the budget that no size moves: SwinMLP's image
                # size had reached 2 unchecked).
                both = {k: max(2, v // 2) for k, v in cur.items()}
                try:
                    tensor_sizes(path, both, forward=forward, strict=forward)
                except Exception:  # noqa: BLE001 - refused together too
                    break
                if both == cur:
                    break
                cur, kept = both, set()
                continue
            name = max(free, key=lambda k: cur[k])
            last = (name, cur[name])
            cur[name] = max(2, cur[name] // 2)
        last = None
    return cur


# A scaled-down size that sizes no input is put back to the problem's own value where the
# elements the model touches grow by less than this share (restored).
RESTORE_SHARE = 0.1


def _touched(path: Path, dims: dict[str, int]) -> tuple[list[list[int]], int]:
    """(the input tensors' shapes, the elements of the inputs, the weights and every
    module's output together) of the problem at `dims`, on the meta device: a proxy for
    what one forward costs (a convolution's output counts, not only the model's)."""
    mod = load_problem(path, dims)
    model = meta_model(mod.Model, mod.get_init_inputs())
    seen = [0]

    def count(_m, _a, out) -> None:
        for t in out if isinstance(out, tuple | list) else [out]:
            if isinstance(t, torch.Tensor):
                seen[0] += t.numel()

    hooks = [m.register_forward_hook(count) for m in model.modules()]
    try:
        with torch.device("meta"):
            args = list(mod.get_inputs())
            model(*args)
    finally:
        for h in hooks:
            h.remove()
    inputs = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
    weights = sum(t.numel() for _, t in _state(model))
    return inputs, sum(math.prod(s) for s in inputs) + weights + seen[0]


def restored(path: Path, full: dict[str, int], cur: dict[str, int]) -> dict[str, int]:
    """`cur` with each size the scaling halved but that sizes no input put back to its own
    value (`full`) while the elements one forward touches (_touched) grow by less than
    RESTORE_SHARE: halving it saved nothing worth the loss. A classifier's `num_classes`
    behind 138M fixed weights (KernelBench level3/11 VGG16, 12 VGG19) scaled to 2 left 20
    logits a constant output matched within 1e-2 on some weight seeds, so the evaluation
    was refused as proving nothing at random; at 1000 it is caught on every seed. A
    convolution's `out_channels` is not put back: its output grows with it."""
    try:
        inputs, base = _touched(path, cur)
    except Exception:  # noqa: BLE001 - the sizing vouched for `cur` without its forward
        return cur
    cap = (1 + RESTORE_SHARE) * base
    out = dict(cur)
    for k in sorted(cur):
        if cur[k] >= full.get(k, cur[k]):
            continue
        trial = {**out, k: full[k]}
        try:  # the inputs first (cheap: a recurrence's meta forward steps in Python)
            rows, _ = tensor_sizes(path, trial, forward=False)
            if [shape for role, shape, _ in rows if role == "input"] != inputs:
                continue
            shapes, total = _touched(path, trial)
        except Exception:  # noqa: BLE001 - the problem refuses these sizes
            continue
        if shapes == inputs and total <= cap:
            out = trial
    return out


FLAT_REL = 1e-6  # an output whose spread is within this share of its magnitude is constant
GROW_LIMIT = 16  # × a CPU shape's budget: how far a constant-output shape may grow back
GROW_STEPS = 4  # doublings back, at most
# Weights a model built for the flatness check may hold (a VGG's 4096-wide classifier at any
# input size: ~0.5 GB and seconds to initialise); a larger one is not checked.
FLAT_MAX_STATE = 1 << 24


def reference_outputs(
    path: Path, dims: dict[str, int], case: str = "random", draws: bool = False
) -> list[torch.Tensor] | None:
    """The problem's floating outputs of more than one element at `dims`, on the CPU in
    float64 (as the reference runs: float32 rounding noise, 3e-5 out of a one-channel
    GroupNorm, is not a signal), on its own inputs under a fixed seed (`case`: as the
    judge's input case of that name transforms them, kernelbench_inputs.CASES); None where
    it does not run here (the sizing already vouched for these sizes on the meta device),
    gives a non-finite value, or holds more than FLAT_MAX_STATE weight elements (not run).
    `draws`: the forward draws random numbers, drawn as a float32 run would (task/draws.py)."""
    try:
        mod = load_problem(path, dims)
        state = _state(meta_model(mod.Model, mod.get_init_inputs()))
        if sum(t.numel() for _, t in state) > FLAT_MAX_STATE:
            return None
        with global_rng(0, "cpu"):
            model = mod.Model(*mod.get_init_inputs()).double()
            args = [
                a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in mod.get_inputs()
            ]
            if case != "random":
                args = [
                    CASES[case](a) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                    for a in args
                ]
            with torch.no_grad(), seeded(1, "cpu", widen=True) if draws else nullcontext():
                out = model(*args)
    except Exception:  # noqa: BLE001 - not ours to judge here
        return None
    outs = out if isinstance(out, tuple | list) else [out]
    floats = [
        o.detach().double()
        for o in outs
        if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel() > 1
    ]
    if not floats or not all(bool(torch.isfinite(o).all()) for o in floats):
        return None
    return floats


def flat_output(path: Path, dims: dict[str, int]) -> bool:
    """Whether the problem's output at `dims` (reference_outputs) is constant: a GroupNorm
    whose groups a scaled-down size left one channel each normalises everything to its
    bias (KernelBench level2/62, 88, 94). No check tells a computed output from a constant
    one there."""
    floats = reference_outputs(path, dims)
    return bool(floats) and all(
        float(o.max() - o.min()) <= FLAT_REL * (1.0 + float(o.abs().max())) for o in floats
    )


def unflattened(
    path: Path, full: dict[str, int], cur: dict[str, int], budget: int
) -> tuple[dict[str, int], bool]:
    """(`cur`, or — where its output is constant — the nearest sizes at which it is not;
    whether the sizes returned still give a constant output). Each step doubles back one
    size the scaling halved (towards `full`, the problem's own), the smallest growth
    first, while no tensor passes GROW_LIMIT × `budget` elements. A problem constant at
    every size tried (a GroupNorm's mean over everything, max over a size-1 axis minus its
    mean: KernelBench level2/23, 80, 83) keeps `cur` and is reported flat."""
    if not flat_output(path, cur):
        return cur, False
    frontier = cur
    for _ in range(GROW_STEPS):
        options = []
        for k, v in frontier.items():
            if v >= full.get(k, v):
                continue
            grown = {**frontier, k: min(full[k], v * 2)}
            try:
                _, largest = tensor_sizes(path, grown, forward=True, strict=True)
            except Exception:  # noqa: BLE001 - the problem refuses these sizes
                continue
            if largest <= GROW_LIMIT * budget:
                options.append((largest, k, grown))
        if not options:
            break
        options.sort(key=lambda o: (o[0], o[1]))
        for _, _, grown in options:
            if not flat_output(path, grown):
                return grown, False
        frontier = options[0][2]
    return cur, True
