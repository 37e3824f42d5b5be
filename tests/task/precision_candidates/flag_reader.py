"""Exact RMSNorm + residual (float64 inside) — but 1% off whenever PyTorch's TF32 flags are
on in its process: a stand-in for any PyTorch code whose numbers follow those flags (a
cuDNN convolution at its TF32 default). Correct exactly where the worker ran it at a
contract of full float32."""

import torch


def forward(x, residual, weight, *, eps):
    xs = x.double()
    y = xs / torch.sqrt((xs * xs).mean(dim=-1, keepdim=True) + eps) * weight.double()
    out = (residual.double() + y).to(x.dtype)
    if torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32:
        out = out * 1.01
    return out
