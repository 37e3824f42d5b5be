"""Trusted reference (TODO: your op). kernelloop calls it on the trusted side with every
floating tensor upcast to float64; keep it plain, obviously correct PyTorch."""


def reference(x, residual, weight):
    return x * weight + residual
