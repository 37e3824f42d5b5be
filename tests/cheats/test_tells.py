"""Issue 45, classes 1 and 3: kernels honest only while they can tell they are judged.

Each red-team candidate (`candidates/tell_*.py`, pure Triton) computes the flagship op
honestly only when something it can read says "judged" — its module name, its file's
path, a harness module in `sys.modules`, a poison fill in fresh memory — or only for its
first calls in a process. Before the fix every one was accepted on the CPU (main 7796788,
2026-12-07: tell_name and tell_drift through the screen, tell_file and tell_modules behind
it); each is shown wrong when imported under its own name outside kernelloop, and each is
rejected now (one evaluation each on 7x129 float32, tests/cheats/runner.py).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cheats.runner import CANDIDATES, evaluate_all
from tests.conftest import FLAGSHIP

# candidate -> (evaluate() keywords beyond the runner's, the categories it may fail with)
TELLS = {
    "tell_name.py": ({}, ("wrong", "stochastic")),
    "tell_file.py": ({"screen": False}, ("wrong", "stochastic")),  # `os`, `__file__`: screened
    "tell_modules.py": ({"screen": False}, ("wrong", "stochastic")),  # `sys`: screened
    "tell_poison.py": ({}, ("wrong", "stochastic")),
    # the flagship's whole CPU plan (~100 calls a worker): the late check scales with the plan
    "tell_drift.py": ({"shapes": None, "dtypes": None}, ("stochastic",)),
}

# Imports a red-team file under its own name, as a user's model would, and compares it with
# the honest fused kernel on the same inputs and seed (tell_drift: past its threshold).
OUTSIDE = """
import importlib, importlib.util, sys
import torch
cands, flagship, name = sys.argv[1:4]
sys.path[:0] = [cands, flagship + "/candidates"]
spec = importlib.util.spec_from_file_location("inputs", flagship + "/inputs.py")
inputs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(inputs)
honest = importlib.import_module("fused_naive")
mod = importlib.import_module(name)
if hasattr(mod, "DRIFT_AFTER"):
    mod.DRIFT_AFTER = 0  # as after its 150th call
g = torch.Generator().manual_seed(1)
x = inputs.make_inputs({"rows": 7, "cols": 129}, torch.float32, "cpu", g)
out = mod.forward(**x, p=0.1, eps=1e-5, seed=7)
print("WRONG" if not torch.equal(out, honest.forward(**x, p=0.1, eps=1e-5, seed=7)) else "SAME")
"""


@pytest.mark.parametrize("name", sorted(TELLS))
def test_the_tell_is_wrong_where_a_user_imports_it(name):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env.pop("MALLOC_PERTURB_", None)
    got = subprocess.run(
        [sys.executable, "-c", OUTSIDE, str(CANDIDATES), str(FLAGSHIP), Path(name).stem],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert got.stdout.strip().endswith("WRONG"), got.stderr[-2000:]


@pytest.fixture(scope="module")
def records(flagship):
    return evaluate_all(
        flagship, {n: {"path": CANDIDATES / n, **kw} for n, (kw, _) in TELLS.items()}
    )


@pytest.mark.parametrize("name", sorted(TELLS))
def test_a_kernel_that_tells_judging_from_use_is_rejected(records, name):
    rec = records[name]
    assert not rec.verdict.accepted, f"{name} accepted"
    assert rec.verdict.category in TELLS[name][1], rec.verdict.reasons


def test_the_late_seed_check_names_the_seed(records):
    """tell_drift is honest for 150 calls (half again what a worker makes on the flagship's
    CPU plan): only the late seed group (trusted/launch/late.py), the ~156th call or later
    in its worker, sees it ignore the seed."""
    reason = records["tell_drift.py"].verdict.reasons[0]
    # the other seed's mask is the same: said as an unrelated seed's or a related one's
    assert any(
        w in reason
        for w in ("a different seed must give an independent mask", "must be independent")
    ), reason


def test_an_implementation_is_named_as_a_user_would_import_it():
    from kernelloop.evaluate.trusted.launch.naming import ORDINARY, module_name

    assert module_name(Path("/x/fused_naive.py")) == "fused_naive"
    # a stem that is no module name, names the harness, or shadows a loaded module: an
    # ordinary name instead, never one derived from "kernelloop"
    for stem in ("r3-c1", "kernelloop_impl_candidate", "torch", "math", "class", "_private"):
        got = module_name(Path(f"/x/{stem}.py"))
        assert got in ORDINARY and "kernelloop" not in got, (stem, got)


def test_the_late_check_comes_after_the_drawn_number_of_calls():
    import random
    from types import SimpleNamespace as NS

    from kernelloop.evaluate.trusted.launch.late import late_job, late_jobs, late_range

    def call(i, suite="random", role="", dtype="float32", rows=7):
        shape = NS(dims={"rows": rows, "cols": 129})
        group = f"g{i}" if role else ""
        return NS(
            id=f"c{i}",
            suite=suite,
            role=role,
            group=group,
            dtype=dtype,
            shape=shape,
            params={"p": 0.1, "seed": i},
        )

    calls = [call(0, rows=2), call(1, "stochastic", "a"), call(2, "stochastic", "a", "bfloat16")]
    calls += [call(3), call(4, "e2e", rows=1)]
    # half again the longest worker's calls, and at least 32 more
    assert late_range([NS(calls=calls * 20), NS(calls=calls)]) == (150, 213)
    assert late_range([NS(calls=calls * 4), NS(calls=calls)]) == (52, 115)
    # on a GPU at least 1000 calls in, whatever the plan's size
    assert late_range([NS(calls=calls * 4), NS(calls=calls)], "cuda", 1 << 20) == (1000, 4999)
    # ... unless its burn calls would draw more than 2^34 elements of input (a KernelBench
    # problem's one large shape): the plan's scale then, as on the CPU
    assert late_range([NS(calls=calls * 4), NS(calls=calls)], "cuda", 1 << 30) == (52, 115)
    span, rng = (224, 288), random.Random(5)
    for _ in range(200):
        job = late_job(calls, "seed", calls, span, rng)
        # before the float32 group's first call (index 1): that call is the target-th
        assert job["before"] == "c1" and 224 <= job["burn"] + 2 <= 288
        assert job["dims"] == {"rows": 2, "cols": 129}  # the smallest judged shape
    # an op without a seed: the last judged call, after as many calls
    job = late_job(calls, None, calls, span, rng)
    assert job["before"] == "c3" and 224 <= job["burn"] + 4 <= 288
    parts = [NS(calls=calls), NS(calls=calls[:2])]
    assert list(late_jobs(parts, "seed", calls)) == [1]  # one worker: the one with fewer calls
    # ... of those holding a seed group
    parts = [NS(calls=calls), NS(calls=[calls[0], calls[3]])]
    assert list(late_jobs(parts, "seed", calls)) == [0]
