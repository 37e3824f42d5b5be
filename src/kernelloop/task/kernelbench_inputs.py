"""Inputs of a task imported from KernelBench (`kernelloop import kernelbench`).

A KernelBench problem is a Python file with `class Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()`, its sizes in top-level integer constants (`batch_size = 4096`). An
imported task's dims are those constants: a shape runs the problem's own code with them
replaced (the file is parsed and the literals rewritten; derived values such as
`bias_shape = (out_channels, 1, 1)` follow). Its inputs, in order:

- the arguments of `Model.forward`, from `get_inputs()` (integer ranges kept), under
  kernelloop's seeded RNG on the call's device; floating-point ones in the dtype judged;
- the model's parameters and buffers, from `Model(*get_init_inputs())` built under the
  same seed, by name with dots as underscores (`gemm.weight` → `gemm_weight`), floating
  point ones in the dtype judged — so every implementation (the reference, the baseline,
  a candidate) gets the same weights as arguments.

This module runs in the trusted process and in the sandboxed worker alike (the task's
`inputs.py` calls `make`); it imports only torch and the standard library.
"""

from __future__ import annotations

import ast
import functools
import inspect
import types
import weakref
from pathlib import Path

import torch

from kernelloop import pyast
from kernelloop.task.draws import draw_seed, global_rng, seeded

_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Pow: lambda a, b: a**b,
}


def _int_value(node: ast.expr) -> int | None:
    """An integer written with literals only (`4096`, `2048 * 2`), else None."""
    if isinstance(node, ast.Constant):
        v = node.value
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_value(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _int_value(node.left), _int_value(node.right)
        if a is not None and b is not None and not (isinstance(node.op, ast.Pow) and b > 64):
            return _OPS[type(node.op)](a, b)
    return None


def _values(node: ast.expr) -> list[int] | int | None:
    """An integer, or a list/tuple of integers, written with literals only."""
    if isinstance(node, ast.List | ast.Tuple):
        vals = [_int_value(e) for e in node.elts]
        return None if not vals or any(v is None for v in vals) else vals  # type: ignore[return-value]
    return _int_value(node)


def _body(source: str) -> list[ast.stmt]:
    """The file's top-level statements, `height, width = 224, 224` split into one
    assignment per name (KernelBench's DenseNets size their images that way)."""
    out: list[ast.stmt] = []
    for node in pyast.parse(source).body:
        t = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if (
            isinstance(t, ast.Tuple)
            and isinstance(node.value, ast.Tuple | ast.List)  # type: ignore[union-attr]
            and len(t.elts) == len(node.value.elts)  # type: ignore[union-attr]
            and all(isinstance(e, ast.Name) for e in t.elts)
            and all(_int_value(e) is not None for e in node.value.elts)  # type: ignore[union-attr]
        ):
            for name, value in zip(t.elts, node.value.elts, strict=True):  # type: ignore[union-attr]
                target = ast.Name(id=name.id, ctx=ast.Store())  # type: ignore[attr-defined]
                out.append(ast.copy_location(ast.Assign(targets=[target], value=value), node))
        else:
            out.append(node)
    return out


def int_constants(source: str) -> dict[str, int]:
    """The file's top-level integer sizes, in order: `NAME = <int>` (literals only, e.g.
    `2048 * 2`; not bools) as NAME, and `NAME = [<int>, ...]` (or a tuple) as NAME_0, ..."""
    out: dict[str, int] = {}
    for node in _body(source):
        if not isinstance(node, ast.Assign):
            continue
        v = _values(node.value)
        for t in node.targets:
            if not isinstance(t, ast.Name) or v is None:
                continue
            if isinstance(v, list):
                out.update({f"{t.id}_{i}": x for i, x in enumerate(v)})
            else:
                out[t.id] = v
    return out


def _rewritten(source: str, dims: dict[str, int]) -> ast.Module:
    tree = pyast.parse(source)
    body: list[ast.stmt] = []
    for node in _body(source):
        v = _values(node.value) if isinstance(node, ast.Assign) else None
        names = [t.id for t in node.targets if isinstance(t, ast.Name)] if v is not None else []
        if v is None or len(names) != len(node.targets):  # type: ignore[union-attr]
            body.append(node)
            continue
        for name in names:  # `h = w = 128` becomes one assignment per name
            if isinstance(v, list):
                elts = [ast.Constant(dims.get(f"{name}_{i}", x)) for i, x in enumerate(v)]
                value: ast.expr = (
                    ast.Tuple(elts=elts, ctx=ast.Load())
                    if isinstance(node.value, ast.Tuple)
                    else ast.List(elts=elts, ctx=ast.Load())
                )
            else:
                value = ast.Constant(dims.get(name, v))
            target = ast.Name(id=name, ctx=ast.Store())
            body.append(ast.copy_location(ast.Assign(targets=[target], value=value), node))
    tree.body = body
    return ast.fix_missing_locations(tree)


@functools.lru_cache(maxsize=16)
def _load(path: str, dims: tuple[tuple[str, int], ...]) -> types.ModuleType:
    source = Path(path).read_text()
    code = pyast.compile_tree(_rewritten(source, dict(dims)), path)
    module = types.ModuleType(f"kernelbench_{Path(path).stem}")
    module.__file__ = path
    exec(code, module.__dict__)  # noqa: S102 - the task's own problem file
    return module


def load_problem(path: Path, dims: dict[str, int] | None = None) -> types.ModuleType:
    """The problem file executed with its integer constants set to `dims` (others kept)."""
    return _load(str(Path(path).resolve()), tuple(sorted((dims or {}).items())))


def forward_args(model_cls: type, given: int | None = None) -> list[str]:
    """The names of `Model.forward`'s arguments (after self) that get_inputs() fills: the
    first `given` (default all); the ones after them keep their defaults (Mamba2's
    `initial_states=None`). *args/**kwargs refused."""
    params = list(inspect.signature(model_cls.forward).parameters.values())[1:]
    bad = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if bad:
        raise ValueError(f"Model.forward takes *{bad[0]}; name every argument")
    n = len(params) if given is None else given
    unfilled = [p.name for p in params[n:] if p.default is inspect.Parameter.empty]
    if n > len(params) or unfilled:
        raise ValueError(
            f"get_inputs() gives {n} value(s) for Model.forward's {len(params)} "
            f"argument(s) {[p.name for p in params]}"
            + (f"; {unfilled} have no default" if unfilled else "")
        )
    return [p.name for p in params[:n]]


def state_arg(name: str) -> str:
    """The input name of a parameter or buffer (`network.0.weight` → `network_0_weight`)."""
    return name.replace(".", "_")


def _state(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [*model.named_parameters(), *model.named_buffers()]


def _cast(value, dtype: torch.dtype):
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return value.to(dtype) if value.is_floating_point() else value
    return value


# Extreme cases for a problem that has only its own distribution (the importer lists them):
# applied to the floating-point forward arguments (never the weights) after they are made.
# KernelBench draws most inputs from torch.rand, in [0, 1): there ReLU is the identity and a
# kernel that copies its input passes; mixed signs and large magnitudes tell them apart.
#
# `small_magnitude` (x 1e-3) makes a normalisation's eps matter (a row's variance of ~1e-7
# against LayerNorm's 1e-5: a kernel that drops eps or adds it outside the root was
# accepted, issue 45); `near_one` (1 + 0.01 (2t - 1)) keeps a long product alive (a
# cumprod of torch.rand drives every row to 0 within ~200 columns, so a kernel that reads
# only its first 1024 columns was accepted); `large_mixed` (x 100, any sign) reaches what a
# ReLU or a min keeps at 0 on the other cases (KernelBench level2/9 subtracts 2 after a
# GEMM: the published inputs give an all-zero output, and some columns stayed 0 on every
# draw of every other case; found by the self-survey, 2026-12-08).
CASES = {
    "mixed_sign": lambda t: t * 2 - 1,
    "large_magnitude": lambda t: t * 100,
    "large_mixed": lambda t: t * 200 - 100,
    "small_magnitude": lambda t: t * 1e-3,
    "near_one": lambda t: 1 + 0.01 * (2 * t - 1),
}


def _trained_like(model: torch.nn.Module) -> None:
    """Parameters as a trained model has them, not as `Model.__init__` leaves them: every
    parameter initialised to one constant c (a norm layer's weight 1 and bias 0) drawn
    around it at its own scale — c(1 + 0.5 N), any sign as trained weights are; 0.1 N for
    c = 0 — and a BatchNorm's running statistics away from
    0 and 1. With the init's constants a LayerNorm that ignores its weight and bias is
    correct on every input (issue 45: accepted on the H100). Randomly initialised
    parameters keep their draw (already secret per call). Runs under the call's seeded
    global generator, on both sides of the boundary alike."""
    with torch.no_grad():
        for name, t in _state(model):
            stat = name.endswith(("running_mean", "running_var"))
            if not (stat or isinstance(t, torch.nn.Parameter)) or not t.is_floating_point():
                continue  # other buffers (a causal mask) are the problem's definition
            if t.numel() == 0 or bool((t != t.flatten()[0]).any()):
                continue
            c = float(t.flatten()[0])
            noise = torch.randn(t.shape, device=t.device, dtype=t.dtype)
            if name.endswith("running_var"):
                t.copy_(torch.exp(0.5 * noise))  # a variance stays positive
            elif t.numel() == 1:  # a scalar keeps its sign (a scale, a temperature)
                t.copy_(c * torch.exp(0.25 * noise) if c != 0 else 0.1 * noise)
            else:  # its own scale, any sign (~2% of a weight of ones below zero)
                t.copy_(c * (1 + 0.5 * noise) if c != 0 else 0.1 * noise)


def make(
    problem: Path,
    dims: dict[str, int],
    dtype: torch.dtype,
    device: str,
    generator: torch.Generator,
    case: str = "random",
    draws: bool = False,
) -> dict:
    """Every input of one call (module docstring): `case` "random" as the problem makes
    them, or one of CASES; `draws`: the forward draws random numbers, and the call's
    `draw_seed` is one more input (task/draws.py)."""
    if case != "random" and case not in CASES:
        raise ValueError(f"unknown input case {case!r}; use 'random' or one of {list(CASES)}")
    mod = load_problem(problem, dims)
    seed = int(generator.initial_seed())
    with global_rng(seed, device), torch.device(device):
        args = list(mod.get_inputs())
        init = list(mod.get_init_inputs())
        torch.manual_seed(seed ^ 0x5EED)
        model = mod.Model(*init)
        _trained_like(model)
    names = forward_args(mod.Model, len(args))
    if case in CASES:
        args = [
            CASES[case](a) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args
        ]
    out = {n: _cast(a, dtype) for n, a in zip(names, args, strict=True)}
    for name, t in _state(model):
        out[state_arg(name)] = _cast(t, dtype)
    if draws:
        out["draw_seed"] = draw_seed(seed)
    return out


def call_model(model: torch.nn.Module, names: list[str], inputs: dict):
    """Run `model` (any device, meta included) with its parameters and buffers taken from
    `inputs` by name and its forward arguments in order."""
    return torch.func.functional_call(model, _given(model, inputs), tuple(inputs[n] for n in names))


def _given(model: torch.nn.Module, inputs: dict) -> dict:
    """The model's parameters and buffers taken from `inputs` by name; buffers copied: a
    BatchNorm in training mode (KernelBench's default) updates its running statistics in
    place, which must not count as the call changing its inputs."""
    buffers = {n for n, _ in model.named_buffers()}
    return {
        name: inputs[state_arg(name)].clone() if name in buffers else inputs[state_arg(name)]
        for name, _ in _state(model)
    }


def fill_init(template, args: tuple, state: dict):
    """get_init_inputs() for these arguments and parameters (by name): each ("@arg", i,
    axis) or ("@state", name, axis) marker (a list once read from JSON) becomes that
    argument's or parameter's size."""
    if isinstance(template, list | tuple):
        if len(template) == 3 and template[0] == "@arg":
            return int(args[template[1]].shape[template[2]])
        if len(template) == 3 and template[0] == "@state":
            return int(state[template[1]].shape[template[2]])
        return type(template)(fill_init(x, args, state) for x in template)
    return template


# The builders of solution-class entries, for the worker to build a model before a call
# whose PyTorch ops it audits: a constructor's weight initialisation (nn.Linear's
# uniform_) is not the call's compute, the constructor never sees a call's inputs, and the
# weights it draws are replaced by the task's. Only entries made by `model_entry` are here,
# so a candidate's own function gets no unaudited step.
PREPARE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def model_entry(module: types.ModuleType, spec: dict):
    """A KernelBench-style solution (`class ModelNew(nn.Module)`) as the task's entry
    function: built once per size with the problem's init inputs for the arguments it is
    called with, run with the task's parameters and buffers swapped in by name (it must
    name them as the problem's Model does). Runs in the worker, on the candidate's class."""
    cls = getattr(module, spec["class"])
    args_names, state = list(spec["forward_args"]), list(spec["state"])
    marks = spec.get("globals", {})
    models: dict[str, torch.nn.Module] = {}
    # The state `prepare` handed over for the next call, for that call's very input
    # tensors: the buffers' copies are the harness's work, made before the
    # call the worker checks (its op audit read them as the candidate's [clone, copy_] and
    # refused a minGPT ModelNew; issue 46). A call on other inputs makes its own.
    ready: list[tuple[dict, dict]] = []  # at most one: (that call's tensors, their state)

    def prepare(**inputs) -> torch.nn.Module:
        model = build(**inputs)
        ready[:] = [(_tensors(inputs), _given(model, inputs))]
        return model

    def prepared(inputs: dict) -> dict | None:
        """The state prepared for exactly these tensor objects (held, so never a reused
        id), handed over once."""
        if not ready:
            return None
        (held, given), mine = ready.pop(), _tensors(inputs)
        same = held.keys() == mine.keys() and all(held[k] is mine[k] for k in held)
        return given if same else None

    def build(**inputs) -> torch.nn.Module:
        args = tuple(inputs[n] for n in args_names)
        given = {n: inputs[state_arg(n)] for n in state}
        # The sizes the problem's code reads as module globals, for this call (as the
        # reference's module has them): a solution that kept `self.hidden =
        # torch.randn((batch_size, hidden_size))` is built at the call's batch size.
        sizes = {k: fill_init(v, args, given) for k, v in marks.items()}
        module.__dict__.update(sizes)
        init = fill_init(spec["init"], args, given)
        key = repr((init, sizes))
        model = models.get(key)
        if model is None:
            device = next((a.device for a in args if isinstance(a, torch.Tensor)), "cpu")
            # From the seed the reference's model is built with: a tensor kept as a plain
            # attribute (not a parameter or buffer) then starts as the reference's does.
            with global_rng(0x5EED, device), torch.device(device):
                model = cls(*init)
            have = sorted(n for n, _ in _state(model))
            if have != sorted(state):
                raise ValueError(
                    f"{spec['class']} has parameters and buffers {have}, the problem's Model "
                    f"{sorted(state)}: name them as Model does, so the task's weights reach it"
                )
            models[key] = model
        return model

    def forward(**inputs):
        model = build(**inputs)
        args = tuple(inputs[n] for n in args_names)
        given = prepared(inputs)
        if given is None:
            given = _given(model, inputs)
        if "draw_seed" not in inputs:
            return torch.func.functional_call(model, given, args)
        # The problem's forward draws random numbers: seeded by the call, as the reference.
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), "cpu")
        with seeded(inputs["draw_seed"], device, widen=False):
            return torch.func.functional_call(model, given, args)

    PREPARE[forward] = prepare
    return forward


def _tensors(inputs: dict) -> dict:
    return {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def entry_function(module: types.ModuleType, entry: str, spec: dict | None):
    """The candidate's entry: its `entry` function, or — on an imported KernelBench task
    whose candidate defines the solution class instead — that class as a function."""
    fn = getattr(module, entry, None)
    if fn is not None:
        return fn
    if spec and hasattr(module, spec["class"]):
        return model_entry(module, spec)
    also = f" or a class {spec['class']}" if spec else ""
    raise AttributeError(f"the candidate defines no function {entry}(){also}")
