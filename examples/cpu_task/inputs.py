"""Inputs for the CPU task (trusted). Cases: random, large (|x| ~ 1e15: squares near
fp32's limit), tiny (|x| ~ 1e-20: squares underflow without care), constant_rows."""

import torch


def make_inputs(dims, dtype, device, generator, case="random"):
    rows, cols = dims["rows"], dims["cols"]
    x = torch.randn((rows, cols), generator=generator, device=device)
    residual = torch.randn((rows, cols), generator=generator, device=device)
    weight = 1.0 + 0.1 * torch.randn((cols,), generator=generator, device=device)
    if case == "large":
        x = x * 1e15
    elif case == "tiny":
        x = x * 1e-20
    elif case == "constant_rows":
        x = (
            torch.randn((rows, 1), generator=generator, device=device)
            .expand(rows, cols)
            .contiguous()
        )
    elif case != "random":
        raise ValueError(f"unknown input case {case!r}")
    return {"x": x.to(dtype), "residual": residual.to(dtype), "weight": weight.to(dtype)}
