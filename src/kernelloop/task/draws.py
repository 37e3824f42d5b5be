"""Random numbers a model draws inside its forward (KernelBench level3/35's LSTM draws its
initial states with `torch.randn` when none are given; a training-mode Dropout draws its
mask), made the same for the reference and the implementation judged.

Such a task has an input `draw_seed` (an int made from the call's input seed, secret and
fresh like every input): the reference and the baseline seed torch's global generator with
it right before the forward (`seeded`), so an implementation that draws the same numbers
in the same order computes the same result. The reference runs in float64, but the
implementation's draws are float32 (torch's default dtype) and a float64 draw is another
stream of numbers; under `Draws(widen=True)` the reference draws exactly what a float32 run draws
and widens it to float64 — `torch.randn(n)` without a dtype, `randn_like` or `normal_` of
a float64 tensor, `F.dropout` of one.

A dropout's mask is drawn the same way on every device (`Draws`, widened or not): as the
CPU draws it, `bernoulli_(1 - p)` of a float32 tensor of the input's shape, scaled by
1/(1 - p). On CUDA, `F.dropout` (and `nn.Dropout`) would run torch's fused dropout kernel,
whose Philox stream no kernel written outside torch can reproduce (measured on the H200,
2026-12-02: a Triton candidate drawing its mask with `bernoulli_` as the CPU does
disagreed with the reference on 597 of 1536 elements). With the portable mask a
candidate draws the model's numbers with the random fills its screen allows."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_F64 = torch.float64
_F32 = torch.float32
_FACTORIES = {torch.randn, torch.rand, torch.normal}
_LIKE = {torch.randn_like, torch.rand_like}
_IN_PLACE = {
    torch.Tensor.normal_,
    torch.Tensor.uniform_,
    torch.Tensor.bernoulli_,
    torch.Tensor.exponential_,
    torch.Tensor.log_normal_,
    torch.Tensor.cauchy_,
    torch.Tensor.geometric_,
}
_DROPOUTS = {F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout}


def draw_seed(input_seed: int) -> int:
    """The call's `draw_seed`, from its input seed (a different stream than its inputs')."""
    return (int(input_seed) * 0x9E3779B1 + 0x5EED) % (1 << 63)


def rng_devices(device) -> list[int]:
    """The CUDA devices whose generator `torch.random.fork_rng` must save for `device`."""
    device = torch.device(device)
    if device.type == "cuda":
        return [device.index if device.index is not None else torch.cuda.current_device()]
    return []


# torch's global generators are one per process (torch.manual_seed reseeds every
# device's). The trusted process judges evaluations side by side in threads (an
# executor's slots), and two threads each seeding them for a block interleave their draws:
# a KernelBench problem's inputs, or its reference's dropout mask, then differ from the
# seed's (tests/task/test_global_rng.py: 7 of 8 threads drew other numbers). Every block
# that seeds them holds this lock; re-entrant, as `seeded` inside `make` is.
_GLOBAL_RNG = threading.RLock()


@contextlib.contextmanager
def global_rng(seed: int, device) -> Iterator[None]:
    """torch's global generator seeded with `seed` (on `device`'s generator too) for the
    block, the caller's own state restored after it, one thread at a time."""
    with _GLOBAL_RNG, torch.random.fork_rng(devices=rng_devices(device)):
        torch.manual_seed(int(seed))
        yield


@contextlib.contextmanager
def seeded(seed: int, device, widen: bool):
    """`global_rng(seed, device)` under `Draws(widen)`."""
    with global_rng(seed, device), Draws(widen):
        yield


class Draws(TorchFunctionMode):
    """A dropout's mask drawn as the CPU draws it, on every device; with `widen`, random
    draws as a float32 run makes them, widened to float64 (module docstring). Only draws
    that would be float64, or float32 by default, are widened; an explicit other dtype (an
    integer `randint`, a bfloat16 draw) is left as asked."""

    def __init__(self, widen: bool) -> None:
        super().__init__()
        self.widen = widen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is F.dropout and args and isinstance(args[0], torch.Tensor):
            return _portable_dropout(args, kwargs)
        if not self.widen:
            return func(*args, **kwargs)
        if func in _FACTORIES and kwargs.get("dtype") in (None, _F64, _F32):
            if func is torch.normal and args and isinstance(args[0], torch.Tensor):
                return _widen_tensor_normal(func, args, kwargs)
            kwargs["dtype"] = _F32
            return func(*args, **kwargs).to(_F64)
        if func in _LIKE and args and _is_f64(args[0]) and kwargs.get("dtype") in (None, _F64):
            kwargs["dtype"] = _F32
            return func(*args, **kwargs).to(_F64)
        if func in _IN_PLACE and args and _is_f64(args[0]):
            tmp = torch.empty_like(args[0], dtype=_F32)
            func(tmp, *args[1:], **kwargs)
            return args[0].copy_(tmp)
        if func is torch.bernoulli and args and _is_f64(args[0]):
            return func(args[0].to(_F32), *args[1:], **kwargs).to(_F64)
        if func in _DROPOUTS and args and _is_f64(args[0]):
            return _widened_dropout(func, args, kwargs)
        return func(*args, **kwargs)


def _is_f64(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype == _F64


def _widen_tensor_normal(func, args, kwargs):
    # torch.normal(mean, std) with tensor moments: drawn at float32 moments, widened.
    narrow = [a.to(_F32) if _is_f64(a) else a for a in args]
    kwargs.pop("dtype", None)
    return func(*narrow, **kwargs).to(_F64)


def _portable_dropout(args, kwargs):
    """`F.dropout(x, p, training, inplace)` with the mask of the module docstring; the
    mask is float32 whatever x's dtype (a float64 x: the float32 run's mask, widened)."""
    names = ("p", "training", "inplace")
    given = dict(zip(names, args[1:], strict=False)) | kwargs
    x = args[0]
    p, training, inplace = (
        float(given.get("p", 0.5)),
        bool(given.get("training", True)),
        bool(given.get("inplace", False)),
    )
    if not training or not 0.0 < p < 1.0:  # no draw: torch's own answer (x, or zeros)
        return F.dropout(x, p, training, inplace)
    noise = torch.empty(x.shape, dtype=_F32, device=x.device).bernoulli_(1.0 - p)
    noise.div_(1.0 - p)
    noise = noise.to(x.dtype)
    return x.mul_(noise) if inplace else x * noise


def _widened_dropout(func, args, kwargs):
    """`func(x)` for a float64 x with the mask a float32 x of the same shape gets: the
    float32 run's scaled mask (its dropout of ones), widened, times x."""
    x, rest = args[0], args[1:]
    inplace = kwargs.pop("inplace", False)
    if len(rest) >= 3:
        inplace, rest = rest[2], rest[:2]
    if func is F.alpha_dropout:  # an affine map of x, not a mask: one float32 run
        out = func(x.to(_F32), *rest, **kwargs).to(_F64)
    else:
        out = x * func(torch.ones_like(x, dtype=_F32), *rest, **kwargs).to(_F64)
    return x.copy_(out) if inplace else out
