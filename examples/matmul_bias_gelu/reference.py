"""Trusted PyTorch reference for out = residual + gelu(x @ w + bias).

kernelloop calls it on the trusted side with every floating tensor upcast to float64,
so the matmul accumulates in float64 and GELU is the exact (erf) form.
"""

import torch


def reference(x, w, bias, residual):
    return residual + torch.nn.functional.gelu(x @ w + bias)
