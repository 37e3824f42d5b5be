"""The neighbour module of helper_import.py: PyTorch compute the screen would refuse."""

import torch


def forward(x, residual, weight, bias, *, p, eps, seed):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)
