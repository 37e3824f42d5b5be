"""torch's global generator from many threads (task/draws.py `global_rng`).

The trusted process judges evaluations side by side in threads (an executor's slots).
An imported KernelBench problem makes its inputs with its own `get_inputs()` under a
seeded global generator, and a reference that draws (a dropout) seeds it for its forward:
two threads doing so at once interleave their draws, so a call's inputs or mask would not
be its seed's — an honest kernel judged against another call's reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from kernelloop.task import load_task
from kernelloop.task.draws import seeded
from kernelloop.task.kernelbench import import_problem
from tests.threads import all_at_once

KB = Path(__file__).parent / "fixtures" / "kernelbench_shared"


def _hammer(draw: Callable[[int], object], same: Callable, threads: int = 8, rounds: int = 150):
    """How many threads, each drawing its own seed again and again, ever drew other numbers
    than the same draw made alone."""
    alone = {s: draw(s) for s in range(threads)}
    differed: list[int] = []

    def work(s: int) -> None:
        for _ in range(rounds):
            if not same(draw(s), alone[s]):
                differed.append(s)
                return

    all_at_once(work, threads)
    return len(differed)


def _bare(seed: int) -> torch.Tensor:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.randn(2000)


def _locked(seed: int) -> torch.Tensor:
    with seeded(seed, "cpu", widen=False):
        return torch.randn(2000)


def test_the_hammer_reaches_the_race_on_a_bare_global_generator():
    # What makes the tests below mean something: without the lock, threads do interleave.
    assert any(_hammer(_bare, torch.equal) for _ in range(3))


def test_seeded_draws_are_the_seeds_from_any_number_of_threads():
    assert _hammer(_locked, torch.equal) == 0


def test_a_kernelbench_problems_inputs_are_the_seeds_from_any_number_of_threads(tmp_path):
    task = load_task(
        import_problem(KB / "level1" / "95_CrossEntropyLoss.py", tmp_path, ["float32"])
    )
    make = task.load_function("inputs")
    shape = task.shapes_for("cpu")[0]

    def inputs(seed: int) -> dict:
        return make(shape.dims, torch.float32, "cpu", torch.Generator().manual_seed(seed))

    def same(a: dict, b: dict) -> bool:
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    assert _hammer(inputs, same, rounds=40) == 0
