"""Run one implementation of a task once inside an NVTX range, for Nsight Compute.

    ncu --clock-control none --nvtx --nvtx-include "kernelloop_profile/" ... \
        python benchmarks/ncu_capture.py TASK IMPL.py --shape 16384x8192 --dtype bfloat16

Warm-up calls (compilation, autotuning) happen outside the range, so only the timed
call's kernels are profiled.
"""

import argparse
import importlib.util
import sys

import torch

from kernelloop.task import load_task


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("impl")
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="bfloat16")
    a = ap.parse_args()
    task = load_task(a.task)
    shape = task.find_shape(a.shape)
    make_inputs = task.load_function("inputs")
    spec = importlib.util.spec_from_file_location("impl", a.impl)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = getattr(mod, task.spec.task.entry)
    g = torch.Generator(device="cuda").manual_seed(0)
    inputs = make_inputs(shape.dims, getattr(torch, a.dtype), "cuda", g, "random")
    params = {**task.spec.params, "seed": 1234}
    for _ in range(2):
        fn(**inputs, **params)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("kernelloop_profile")
    fn(**inputs, **params)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
