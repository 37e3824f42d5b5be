"""The Python an import of a KernelBench problem writes next to the verbatim problem: the
wrapper appended to it as `reference.py` / `baseline.py` (the problem's Model called with
the weights it is given, built for the call's sizes, its draws seeded) and `inputs.py`."""

from __future__ import annotations

from kernelloop.task.kernelbench_follow import Follow
from kernelloop.task.kernelbench_inputs import state_arg


def wrapper(
    name: str, args: list[str], state: list[str], doc: str, marks: Follow, draws: bool
) -> str:
    """The function appended to the verbatim problem (reference or baseline); `draws`: the
    forward draws random numbers, seeded by the call's `draw_seed` (task/draws.py)."""
    params = ", ".join([*args, *(state_arg(s) for s in state), *(["draw_seed"] if draws else [])])
    state_items = ", ".join(f"{s!r}: {state_arg(s)}" for s in state)
    arg_tuple = "".join(f"{a}, " for a in args)
    return f'''

# ---- kernelloop (import kernelbench) -------------------------------------------------
# get_init_inputs() with each size that is an argument's size marked ("@arg", i, axis),
# or a parameter's ("@state", name, axis): the model is built for the size it is called
# with; so are the sizes its code reads as module globals (_KL_GLOBALS), set before it is
# built and called.
_KL_INIT = {marks.init!r}
_KL_GLOBALS = {marks.globals!r}
_KL_MODELS = {{}}


def _kl_init(v, args, state):
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "@arg":
        return int(args[v[1]].shape[v[2]])
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "@state":
        return int(state[v[1]].shape[v[2]])
    if isinstance(v, (list, tuple)):
        return type(v)(_kl_init(x, args, state) for x in v)
    return v


def _kl_plain(model):
    # Tensors a model keeps as plain attributes (not parameters or buffers: level3/33's
    # hidden state): the call never gives them.
    return [v for m in model.modules() for v in vars(m).values() if isinstance(v, torch.Tensor)]


def _kl_build(init, device):
    try:
        with torch.device("meta"):  # structure only: the weights are arguments
            model = Model(*init)
    except RuntimeError:  # its constructor reads values (Swin: Tensor.item()): moved after
        model = Model(*init).to("meta")
    if not _kl_plain(model):
        return model, False
    # Plain tensors are built for real, from a fixed seed (a ModelNew's are built alike).
    from kernelloop.task.draws import global_rng

    with global_rng(0x5EED, device), torch.device(device):
        return Model(*init), True


def _kl_core(model, state, args):
    return torch.func.functional_call(model, state, args)


# The problem's own computation: what the "compiled" slot compiles (worker/compiled.py),
# the wrapper around it staying eager — compiling the wrapper made dynamo guard on its
# bookkeeping and recompile on every call.
_KL_CORE = _kl_core


def {name}(*, {params}):
    """{doc}"""
    args = ({arg_tuple})
    state = {{{state_items}}}
    sizes = {{k: _kl_init(v, args, state) for k, v in _KL_GLOBALS.items()}}
    globals().update(sizes)
    init = _kl_init(_KL_INIT, args, state)
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), "cpu")
    key = repr((init, sizes, str(device)))
    if key not in _KL_MODELS:
        _KL_MODELS[key] = _kl_build(init, device)
    model, keeps = _KL_MODELS[key]
    # Buffers copied: a BatchNorm in training mode updates its running statistics in place.
    buffers = {{n for n, _ in model.named_buffers()}}
    state = {{n: (t.clone() if n in buffers else t) for n, t in state.items()}}
    if {draws!r}:  # its forward draws random numbers: seeded by the call (task/draws.py)
        from kernelloop.task.draws import seeded

        wide = any(isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args)
        with seeded(draw_seed, device, widen=wide):
            out = _KL_CORE(model, state, args)
    else:
        out = _KL_CORE(model, state, args)
    # Only a model that keeps plain tensors is searched (after the call: it may replace
    # them); the others add nothing to the timed call.
    kept = {{v.untyped_storage().data_ptr() for v in _kl_plain(model)}} if keeps else ()
    return _kl_dense(out, kept)


def _kl_dense(out, kept=()):
    # kernelloop's output contract is contiguous tensors: a view the model returns (einops'
    # rearrange in Mamba2) is made dense here, as a candidate's output must be. An output
    # that is state the model keeps (a recurrent hidden state) is copied: the model's next
    # call would overwrite it in place.
    if isinstance(out, torch.Tensor):
        return out.clone() if out.untyped_storage().data_ptr() in kept else out.contiguous()
    if isinstance(out, (tuple, list)):
        return type(out)(_kl_dense(o, kept) for o in out)
    return out
'''


INPUTS_PY = '''"""Inputs of this imported KernelBench problem (kernelbench_inputs.make)."""

from pathlib import Path

from kernelloop.task.kernelbench_inputs import make

_PROBLEM = Path(__file__).with_name("problem.py")


def make_inputs(dims, dtype, device, generator, case="random"):
    return make(_PROBLEM, dims, dtype, device, generator, case, draws={draws})
'''
