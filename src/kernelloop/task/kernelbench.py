"""`kernelloop import kernelbench`: a KernelBench problem file as a kernelloop task folder.

One folder per problem:
- `problem.py`: the problem file, verbatim (`Model`, `get_inputs`, `get_init_inputs`);
- `reference.py`: the problem file, verbatim, then `reference(...)`: the `Model` run with
  the parameters and buffers it is given (the judge calls it on float64 inputs);
- `baseline.py`: the same, as `forward(...)` in the dtype judged — the PyTorch model is
  the baseline (`baseline_language = "torch"`; candidates are Triton, or CUDA C++ with
  `--language cuda`);
- `inputs.py`: `make_inputs` through `kernelloop.task.kernelbench_inputs` (the problem's
  own `get_inputs`/`get_init_inputs` under kernelloop's seeded RNG, at each shape's dims);
- `kernelbench.json`: what a KernelBench-style solution needs (class `ModelNew`, the
  forward arguments, the parameter and buffer names, the init inputs' template): a
  solution file that defines `ModelNew` instead of `forward` evaluates as it is;
- `task.toml`: dims are the problem's top-level integer constants of 16 or more (smaller
  ones — an axis, a kernel size — are kept as written); the GPU shape is the problem's own
  size, two CPU shapes are scaled down (the largest dim halved until every tensor is
  small); KernelBench's tolerance (atol = rtol = 1e-2) for float32, 5e-2 for 16-bit
  dtypes; the output's shape and dtype come from the reference (`output_like = ""`);
  the roofline's bytes are the inputs', parameters' and output's at the problem's size.
"""

from __future__ import annotations

import ast
import json
import math
import re
import shutil
from pathlib import Path

import torch

from kernelloop.errors import KernelloopError
from kernelloop.task.kernelbench_inputs import (
    CASES,
    _state,
    forward_args,
    int_constants,
    load_problem,
    state_arg,
)

SCALABLE_MIN = 16  # integer constants below this are axes, kernel sizes, counts: kept
CPU_BUDGETS = (1 << 12, 1 << 15)  # the largest tensor's elements on each CPU shape
TOLERANCE = {"float32": 1e-2, "float16": 5e-2, "bfloat16": 5e-2}


def problem_files(path: Path) -> list[Path]:
    """`path` itself (a .py file) or every problem file under it (sorted)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise KernelloopError(f"{path} does not exist; pass a KernelBench problem file or folder.")
    files = sorted(p for p in path.rglob("*.py") if "Model" in p.read_text(errors="replace"))
    if not files:
        raise KernelloopError(f"{path} holds no KernelBench problem (a .py file with a Model).")
    return files


def task_name(path: Path) -> str:
    parent = path.parent.name
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", path.stem).strip("_")
    return f"{parent}_{stem}" if parent.startswith("level") else stem


def _check_source(path: Path, source: str) -> str:
    """The Model's first docstring line; KernelloopError if the file is not a problem."""
    tree = ast.parse(source, str(path))
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        raise KernelloopError(
            f"{path} is not a KernelBench problem: it defines no {', '.join(missing)}."
        )
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    doc = (ast.get_docstring(model) or "").strip().splitlines()
    return doc[0].strip() if doc else ""


def _sizes(
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


def _shape_dims(path: Path, dims: dict[str, int]) -> dict[str, int]:
    """The sizes that size a tensor (an input or a weight): a constant that only configures
    the model (GroupNorm's num_groups = 128) reaches the judge's Model through
    get_init_inputs as the number it was at import, whatever a shape says, so varying it
    would describe shapes that are never run (and unseen shapes that fail). Kept fixed."""
    base, _ = _sizes(path, dims, forward=False)
    kept = {}
    for k, v in dims.items():
        try:
            moved, _ = _sizes(path, {**dims, k: v * 2}, forward=False)
        except Exception:  # noqa: BLE001 - the problem refuses it: it matters
            moved = None
        if moved != base:
            kept[k] = v
    return kept or dims


def sizes_ok(path: Path, dims: dict[str, int]) -> bool:
    """Whether the problem at `path` builds its inputs and Model at `dims` and runs its
    forward there (on the meta device: no memory; an op without a meta kernel passes)."""
    try:
        _sizes(path, dims, forward=True, strict=True)
    except Exception:  # noqa: BLE001 - the problem's own check of its sizes
        return False
    return True


def _scaled(path: Path, dims: dict[str, int], budget: int) -> dict[str, int]:
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
                _, largest = _sizes(path, cur, forward=forward, strict=forward)
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
                    _sizes(path, both, forward=forward, strict=forward)
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


def _roofline_bytes(rows: list[tuple[str, list[int], bool]]) -> str:
    floats = sum(_numel(s) for _, s, f in rows if f)
    others = sum(_numel(s) for _, s, f in rows if not f)
    return f"elem_size * {floats} + 8 * {others}" if others else f"elem_size * {floats}"


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


_PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069, 1087)


def _init_template(path: Path, dims: dict[str, int]) -> list:
    """get_init_inputs() at the problem's size, with every value that is one of the
    forward arguments' sizes replaced by where it comes from, ("@arg", i, axis): a model
    whose structure depends on its size (LayerNorm's normalized_shape) is then built for
    the size it is called with, on any shape. Found by running the problem with each dim
    set to a distinct prime and looking the primes up in the arguments' shapes."""
    base = list(load_problem(path, dims).get_init_inputs())
    if len(dims) > len(_PRIMES):
        return base
    try:
        probe = dict(zip(dims, _PRIMES, strict=False))
        mod = load_problem(path, probe)
        with torch.device("meta"):
            args = list(mod.get_inputs())
        init = list(mod.get_init_inputs())
    except Exception:  # noqa: BLE001 - a problem that needs its own sizes: the plain values
        return base
    where = {}
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
    primes = set(probe.values())

    def walk(p, b):
        if isinstance(p, list | tuple) and isinstance(b, list | tuple) and len(p) == len(b):
            return type(b)(walk(x, y) for x, y in zip(p, b, strict=True))
        if isinstance(p, int) and not isinstance(p, bool) and p in primes and p in where:
            return where[p]
        return b

    return walk(init, base) if len(init) == len(base) else base


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


def _wrapper(name: str, args: list[str], state: list[str], doc: str, template: list) -> str:
    """The function appended to the verbatim problem (reference or baseline)."""
    params = ", ".join([*args, *(state_arg(s) for s in state)])
    state_items = ", ".join(f"{s!r}: {state_arg(s)}" for s in state)
    arg_tuple = "".join(f"{a}, " for a in args)
    return f'''

# ---- kernelloop (import kernelbench) -------------------------------------------------
# get_init_inputs() with each size that is an argument's size marked ("@arg", i, axis),
# or a parameter's ("@state", name, axis): the model is built for the size it is called with.
_KL_INIT = {template!r}
_KL_MODELS = {{}}


def _kl_init(v, args, state):
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "@arg":
        return int(args[v[1]].shape[v[2]])
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "@state":
        return int(state[v[1]].shape[v[2]])
    if isinstance(v, (list, tuple)):
        return type(v)(_kl_init(x, args, state) for x in v)
    return v


def {name}(*, {params}):
    """{doc}"""
    args = ({arg_tuple})
    state = {{{state_items}}}
    init = _kl_init(_KL_INIT, args, state)
    key = repr(init)
    if key not in _KL_MODELS:
        try:
            with torch.device("meta"):  # structure only: the weights are arguments
                _KL_MODELS[key] = Model(*init)
        except RuntimeError:  # its constructor reads values (Swin: Tensor.item()): moved after
            _KL_MODELS[key] = Model(*init).to("meta")
    model = _KL_MODELS[key]
    # Buffers copied: a BatchNorm in training mode updates its running statistics in place.
    buffers = {{n for n, _ in model.named_buffers()}}
    state = {{n: (t.clone() if n in buffers else t) for n, t in state.items()}}
    return _kl_dense(torch.func.functional_call(model, state, args))


def _kl_dense(out):
    # kernelloop's output contract is contiguous tensors: a view the model returns (einops'
    # rearrange in Mamba2) is made dense here, as a candidate's output must be.
    if isinstance(out, torch.Tensor):
        return out.contiguous()
    if isinstance(out, (tuple, list)):
        return type(out)(_kl_dense(o) for o in out)
    return out
'''


INPUTS_PY = '''"""Inputs of this imported KernelBench problem (kernelbench_inputs.make)."""

from pathlib import Path

from kernelloop.task.kernelbench_inputs import make

_PROBLEM = Path(__file__).with_name("problem.py")


def make_inputs(dims, dtype, device, generator, case="random"):
    return make(_PROBLEM, dims, dtype, device, generator, case)
'''


def _shape_toml(table: str, dims: dict[str, int], tag: str) -> str:
    inner = ", ".join(f"{k} = {v}" for k, v in dims.items())
    return f'[[{table}]]\ndims = {{ {inner} }}\nweight = 1.0\ntag = "{tag}"\n'


LANGUAGES = ("triton", "cuda")


def import_problem(
    path: Path,
    out: Path,
    dtypes: list[str],
    force: bool = False,
    name: str | None = None,
    language: str = "triton",
    atol: float | None = None,
    rtol: float | None = None,
) -> Path:
    """Write one task folder for the problem at `path` under `out` (named `name`, default
    from the file's level and name) whose candidates are written in `language` (Triton, or
    CUDA C++ built with load_inline); its path. `atol`/`rtol` replace KernelBench's
    tolerance for every dtype (where an output is much smaller than 1e-2 its default
    accepts anything: level1/23's softmax rows of 393216 are all below 2e-4)."""
    if language not in LANGUAGES:
        raise KernelloopError(f"language {language!r} is not one of {list(LANGUAGES)}.")
    source = path.read_text()
    doc = _check_source(path, source)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name) if name else task_name(path)
    folder = out / name
    if folder.exists() and any(folder.iterdir()) and not force:
        raise KernelloopError(f"{folder} exists and is not empty; pass --force to overwrite it.")
    bad = [d for d in dtypes if d not in TOLERANCE]
    if bad:
        raise KernelloopError(f"dtype(s) {bad} are not supported; use some of {list(TOLERANCE)}.")
    consts = int_constants(source)
    dims = {k: v for k, v in consts.items() if v >= SCALABLE_MIN}
    if not dims:
        raise KernelloopError(
            f"{path} has no top-level integer size (e.g. batch_size = 4096) to make shapes of."
        )
    dims = _shape_dims(path, dims)
    mod = load_problem(path, dims)
    with torch.device("meta"):
        given = len(mod.get_inputs())
    try:
        args = forward_args(mod.Model, given)
    except ValueError as e:
        raise KernelloopError(f"{path}: {e}; make get_inputs() match forward.") from None
    state = [n for n, _ in _state(meta_model(mod.Model, mod.get_init_inputs()))]
    clash = sorted(set(args) & {state_arg(s) for s in state})
    if clash or len({state_arg(s) for s in state}) != len(state):
        raise KernelloopError(
            f"{path}: parameter names collide with forward arguments ({clash}); rename them."
        )
    rows, _ = _sizes(path, dims)
    cpu = [_scaled(path, dims, b) for b in CPU_BUDGETS]
    cpu = [c for i, c in enumerate(cpu) if c not in cpu[:i]]
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, folder / "problem.py")
    ref_doc = "The problem's Model on the inputs it is given (the judge passes float64)."
    base_doc = "The problem's Model in PyTorch eager: the baseline to beat."
    table = _init_template(path, dims)
    (folder / "reference.py").write_text(
        source + _wrapper("reference", args, state, ref_doc, table)
    )
    (folder / "baseline.py").write_text(source + _wrapper("forward", args, state, base_doc, table))
    (folder / "inputs.py").write_text(INPUTS_PY)
    contract = {"class": "ModelNew", "forward_args": args, "state": state, "init": table}
    (folder / "kernelbench.json").write_text(json.dumps(contract, indent=1) + "\n")
    for what, v in (("atol", atol), ("rtol", rtol)):
        if v is not None and not (v >= 0 and math.isfinite(v)):
            raise KernelloopError(f"--{what} {v} is not a finite number >= 0.")
    tol = "\n".join(
        f"[tolerances.{d}]\n"
        f"atol = {TOLERANCE[d] if atol is None else atol:g}\n"
        f"rtol = {TOLERANCE[d] if rtol is None else rtol:g}\n"
        for d in dtypes
    )
    shapes = _shape_toml("shapes", dims, "common") + "\n".join(
        _shape_toml("cpu_shapes", c, "common") for c in cpu
    )
    description = (doc or f"KernelBench {name}").replace('"', "'")
    (folder / "task.toml").write_text(
        f"# Imported from KernelBench ({path.name}) by `kernelloop import kernelbench`.\n"
        f"# dims: the problem's top-level integer sizes; the GPU shape is its own size.\n"
        f"dtypes = {dtypes!r}\n\n"
        f"[task]\n"
        f'name = "{name}"\n'
        f'description = "{description}"\n'
        f'language = "{language}"\n'
        f'baseline_language = "torch"\n'
        f'entry = "forward"\n'
        f'baseline = "baseline.py"\n'
        f'reference = "reference.py:reference"\n'
        f'inputs = "inputs.py:make_inputs"\n'
        f'output_like = ""\n'
        f'kernelbench = "kernelbench.json"\n\n'
        f"[suites]\nextreme = {list(CASES)!r}\nrandom_repeats = 2\n\n"
        f"{tol}\n{shapes}\n"
        f"# Minimal DRAM traffic at the problem's own size (inputs, weights and output once).\n"
        f"[roofline]\n"
        f'bytes = "{_roofline_bytes(rows)}"\n'
    )
    return folder
