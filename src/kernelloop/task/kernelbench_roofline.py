"""The roofline terms of an imported KernelBench problem at its own size: the minimal DRAM
bytes (every input, weight and output once, each at its real element size) and the flops
of its matmuls, convolutions and attention (torch.utils.flop_counter on the meta device).

Why real element sizes: a problem's integer and boolean tensors keep their own dtype when
the task is judged in another float dtype. Counting them at 8 bytes made level1/93's
masked cumsum floor 4.02 ms instead of 2.26 ms on an H200 (its bool mask is 1 byte an
element), so an honest kernel read as 164% of its floor and bench's impossibility check
could have rejected it (issue 34).

Why flops: a GEMM or convolution problem is compute-bound; a memory-only floor put
level2/22's GEMM + epilogue at 11% of floor where the compute floor is what binds it. The
flop counter counts what PyTorch itself counts as flops (a multiply-add is 2) for matmuls,
convolutions and scaled-dot-product attention; elementwise work is left out, which keeps
the floor a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from kernelloop.task.kernelbench_inputs import _state, load_problem
from kernelloop.task.kernelbench_sizes import meta_model


@dataclass(frozen=True)
class RooflineTerms:
    float_elems: int  # elements of floating tensors: they take the judged dtype's size
    other_bytes: int  # bytes of integer/boolean tensors at their own element size
    flops: int  # 0 where the problem has no counted op or its meta forward fails
    note: str = ""  # why the flops are 0 where that is not the problem's doing

    def bytes_expr(self) -> str:
        if self.other_bytes:
            return f"elem_size * {self.float_elems} + {self.other_bytes}"
        return f"elem_size * {self.float_elems}"


def roofline_terms(path: Path, dims: dict[str, int]) -> RooflineTerms:
    """The problem at `dims` on the meta device: its tensors' sizes and its flops."""
    mod = load_problem(path, dims)
    model = meta_model(mod.Model, mod.get_init_inputs())
    note = ""
    with torch.device("meta"):
        args = list(mod.get_inputs())
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        tensors += [t for _, t in _state(model)]
        counter = FlopCounterMode(display=False)
        out = None
        try:
            with counter:
                out = model(*args)
        except NotImplementedError as e:  # an op without a meta kernel
            note = f"no flops counted: the meta forward needs an op it lacks ({e})"[:200]
        except Exception as e:  # noqa: BLE001 - the problem refuses the meta device
            note = f"no flops counted: the meta forward failed ({type(e).__name__})"
    tensors += _flat_tensors(out)
    floats = sum(t.numel() for t in tensors if t.is_floating_point())
    others = sum(t.numel() * t.element_size() for t in tensors if not t.is_floating_point())
    flops = int(counter.get_total_flops()) if not note else 0
    return RooflineTerms(floats, others, flops, note)


def _flat_tensors(out: object) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, tuple | list):
        return [t for o in out for t in _flat_tensors(o)]
    return []
