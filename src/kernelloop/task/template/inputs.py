"""Input generator (trusted code; TODO: your op's inputs).

`make_inputs(dims, dtype, device, generator, case)` returns the entry's tensor arguments
by name, in the entry's order, built from `dims` (one of the task's shapes) in `dtype` on
`device`, drawn from `generator` so the same seed gives the same inputs. kernelloop checks
the tensors follow the declared dims and dtypes before anything is judged.

Cases: random; large (|x| ~ 1e4); tiny (|x| ~ 1e-4).
"""

import torch


def make_inputs(dims, dtype, device, generator, case="random"):
    rows, cols = dims["rows"], dims["cols"]
    x = torch.randn((rows, cols), generator=generator, device=device)
    residual = torch.randn((rows, cols), generator=generator, device=device)
    weight = torch.randn((cols,), generator=generator, device=device)
    if case == "large":
        x = x * 1e4
    elif case == "tiny":
        x = x * 1e-4
    elif case != "random":
        raise ValueError(f"unknown input case {case!r}")
    return {"x": x.to(dtype), "residual": residual.to(dtype), "weight": weight.to(dtype)}
