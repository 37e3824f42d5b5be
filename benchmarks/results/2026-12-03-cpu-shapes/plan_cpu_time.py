"""CPU time of one CPU plan's calls of the flagship baseline, interpreted in-process
(README.md here). `python plan_cpu_time.py SRC ROOT`: SRC goes first on sys.path, so its
kernelloop plans the calls."""
# ruff: noqa: E402  (SRC must come first on sys.path)

import os
import sys
import time

sys.path.insert(0, sys.argv[1])
os.environ["TRITON_INTERPRET"] = "1"
import torch

torch.set_num_threads(1)
import importlib.util

from kernelloop.evaluate.trusted.plan import plan_calls

import kernelloop
from kernelloop.task import load_task
from kernelloop.task.generic_cases import with_generic_cases

print(kernelloop.__file__)
root = sys.argv[2]
t = load_task(root + "/examples/ln_softmax_dropout")
spec = importlib.util.spec_from_file_location(
    "b", root + "/examples/ln_softmax_dropout/baseline.py"
)
b = importlib.util.module_from_spec(spec)
spec.loader.exec_module(b)
mk = with_generic_cases(t.load_function("inputs"))
tot = {}
for rep in range(2):
    plan = plan_calls(t, list(t.spec.cpu_shapes), list(t.spec.dtypes))
    cpu = 0.0
    for c in plan.calls:
        if c.suite == "e2e":
            continue
        g = torch.Generator().manual_seed(c.input_seed)
        x = mk(c.shape.dims, getattr(torch, c.dtype), "cpu", g, c.case)
        t0 = time.process_time()
        b.forward(**x, **{**t.spec.params, **c.params})
        dt = time.process_time() - t0
        cpu += dt
        key = (
            "undeclared/unseen"
            if c.shape.tag in ("undeclared", "unseen")
            else c.suite + ("-refill" if c.role == "refill" else "")
        )
        tot[key] = tot.get(key, 0) + dt
    print(rep, len(plan.calls), "calls, candidate CPU s:", round(cpu, 2))
print({k: round(v / 2, 2) for k, v in sorted(tot.items())})
