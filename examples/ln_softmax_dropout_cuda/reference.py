"""Trusted PyTorch reference for out = residual + dropout(softmax(layer_norm(x)·w + b), p).

kernelloop calls it on the trusted side with every floating tensor upcast to float64.
Dropout cannot be reproduced without the candidate's RNG, so the reference takes an
explicit boolean `keep_mask`: all-True gives "every element kept and scaled by 1/(1-p)",
all-False gives "every element dropped"; with p == 0 no mask is needed.
"""

import torch


def reference(x, residual, weight, bias, *, p, eps, seed, keep_mask=None):
    del seed  # the reference's randomness comes only through keep_mask
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)
    s = torch.softmax(y, dim=-1)
    if p == 0:
        return residual + s
    if keep_mask is None:
        raise ValueError("p > 0 needs an explicit keep_mask on the trusted side")
    return residual + torch.where(keep_mask, s / (1.0 - p), torch.zeros_like(s))
