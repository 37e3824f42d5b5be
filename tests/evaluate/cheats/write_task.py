"""Tries to rewrite the task's reference (found through the harness's own modules) so that
anything passes."""

import os
import sys


def forward(x, residual, weight, bias, *, p, eps, seed):
    task_dir = os.path.dirname(sys.modules["kernelloop_task_inputs"].__file__)
    for name in ("reference.py", "task.toml", "evil.py"):
        try:
            with open(os.path.join(task_dir, name), "w") as f:
                f.write("def reference(*a, **k):\n    return None\n")
        except OSError as e:
            print("write refused:", e)
    return residual.clone()
