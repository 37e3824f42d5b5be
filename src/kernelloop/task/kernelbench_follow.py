"""How an imported KernelBench model follows the size it is called with.

The judge calls the problem's `Model` (and a `ModelNew` solution) at every shape of the
task, but builds it from `get_init_inputs()` as written at the problem's own size, in a
module whose top-level sizes are also as written. A size reaches the model two ways:
- as an init argument (`nn.LayerNorm(normalized_shape)`): where a forward argument's or a
  parameter's shape carries it, the template marks it ("@arg", i, axis) or ("@state",
  name, axis), and the model is built for the size it is called with;
- as a module global the model's code reads (level3/33's `self.hidden =
  torch.randn((batch_size, hidden_size))` in `__init__`): marked the same way, and set in
  the module before the model is built and called.
A size that reaches the model by either way but has no mark (level3/28's `patch_size`:
the weights are `3 * patch_size**2` wide, no shape is `patch_size`) cannot follow a call:
it is *fixed* — kept at the problem's own value on every shape — rather than described
by shapes at which the model the judge builds would be another model.

Found by running the problem with every size set to a distinct prime and looking the
primes up in the arguments' and parameters' shapes.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kernelloop.task.draws import global_rng
from kernelloop.task.kernelbench_inputs import _state, load_problem
from kernelloop.task.kernelbench_sizes import meta_model

_PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069, 1087)
_INPUT_MAKERS = ("get_inputs", "get_init_inputs")


@dataclass
class Follow:
    """`init`: get_init_inputs() with its sizes marked; `globals`: {name: mark} for the
    sizes the model reads as module globals; `fixed`: sizes that cannot follow a call."""

    init: list
    globals: dict[str, tuple] = field(default_factory=dict)
    fixed: list[str] = field(default_factory=list)


def globals_read(source: str, filename: str = "<problem>") -> set[str]:
    """The module-level names the problem's classes and functions read (LOAD_GLOBAL,
    LOAD_NAME in a class body) — never an attribute (`self.hidden_size`) or a local
    (`batch_size = x.size(0)`) of the same name. get_inputs and get_init_inputs are left
    out: the input generator runs at each shape's own sizes."""
    code = compile(source, filename, "exec", dont_inherit=True)
    seen: set[str] = set()
    stack = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    while stack:
        c = stack.pop()
        if c.co_name in _INPUT_MAKERS:
            continue
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
                seen.add(ins.argval)
        stack.extend(x for x in c.co_consts if isinstance(x, types.CodeType))
    return seen


def follow(path: Path, dims: dict[str, int]) -> Follow:
    """The marks for the problem at `path` with sizes `dims` (module docstring)."""
    base = list(load_problem(path, dims).get_init_inputs())
    if len(dims) > len(_PRIMES):
        return Follow(base)
    try:
        probe = dict(zip(dims, _PRIMES, strict=False))
        mod = load_problem(path, probe)
        with torch.device("meta"):
            args = list(mod.get_inputs())
        init = list(mod.get_init_inputs())
    except Exception:  # noqa: BLE001 - a problem that needs its own sizes: the plain values
        return Follow(base)
    where: dict[int, tuple] = {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            for ax, n in enumerate(a.shape):
                where.setdefault(int(n), ("@arg", i, ax))
    # A size no argument has (a Linear's out_features) may be a parameter's: it then comes
    # from the weight the call is given, so the model built matches it on every shape.
    try:
        model = meta_model(mod.Model, init)
        for name, t in _state(model):
            for ax, n in enumerate(t.shape):
                where.setdefault(int(n), ("@state", name, ax))
    except Exception:  # noqa: BLE001 - primes it cannot be built with: one size at a time
        for dim, found in _state_axes(path, dims).items():
            where.setdefault(probe[dim], found)
    primes = {p: d for d, p in probe.items()}
    unmarked: set[str] = set()

    def walk(p, b):
        if isinstance(p, list | tuple) and isinstance(b, list | tuple) and len(p) == len(b):
            return type(b)(walk(x, y) for x, y in zip(p, b, strict=True))
        if isinstance(p, int) and not isinstance(p, bool) and p in primes:
            if p in where:
                return where[p]
            unmarked.add(primes[p])
        return b

    template = walk(init, base) if len(init) == len(base) else base
    read = globals_read(Path(path).read_text(), str(path))
    marks = {d: where[probe[d]] for d in dims if d in read and probe[d] in where}
    unmarked |= {d for d in dims if d in read and probe[d] not in where}
    return Follow(template, marks, sorted(unmarked))


def _state_axes(path: Path, dims: dict[str, int]) -> dict[str, tuple[str, str, int]]:
    """{dim: ("@state", parameter, axis)} for the sizes a parameter's shape follows, found
    by moving one size at a time from the problem's own (doubled, else halved) where a
    model with every size a distinct prime cannot be built: a depthwise Conv2d needs
    out_channels divisible by in_channels (KernelBench level1/84), so its out_channels
    was left a constant and a call at other sizes built a model that refused them."""

    def shapes(at: dict[str, int]) -> dict[str, list[int]]:
        mod = load_problem(path, at)
        return {n: list(t.shape) for n, t in _state(meta_model(mod.Model, mod.get_init_inputs()))}

    try:
        base = shapes(dims)
    except Exception:  # noqa: BLE001 - nothing to compare against
        return {}
    found: dict[str, tuple[str, str, int]] = {}
    for dim, v in dims.items():
        for new in (v * 2, v // 2):
            if new < 2:
                continue
            try:
                moved = shapes({**dims, dim: new})
            except Exception:  # noqa: BLE001 - the problem refuses this size
                continue
            hits = [
                (name, ax)
                for name, shape in moved.items()
                for ax, n in enumerate(shape)
                if n == new and ax < len(base.get(name, [])) and base[name][ax] == v
            ]
            if hits:
                found[dim] = ("@state", *hits[0])
            break
    return found


def draws(path: Path, dims: dict[str, int]) -> bool:
    """Whether the problem's forward draws random numbers from torch's global generator
    (level3/35's LSTM draws its initial states; a training-mode Dropout its mask): run once
    at `dims` on the CPU, the generator's state compared before and after the forward.
    False where it does not run here."""
    try:
        mod = load_problem(path, dims)
        with global_rng(0, "cpu"):
            args = list(mod.get_inputs())
            model = mod.Model(*mod.get_init_inputs())
            before = torch.get_rng_state()
            with torch.no_grad():
                model(*args)
            return not torch.equal(before, torch.get_rng_state())
    except Exception:  # noqa: BLE001 - not ours to judge here
        return False
