"""Evaluate many candidates at once: each evaluation is mostly a worker process waiting on
its own imports, so two at a time roughly halve the wall time on a 2-core runner."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelloop.evaluate.trusted.run import evaluate

CANDIDATES = Path(__file__).parent / "candidates"
SMALL = {
    "device": "cpu",
    "shapes": "7x129",
    "dtypes": ["float32"],
    "timing": False,
    "timeout_s": 180,
}


def evaluate_all(task, jobs: dict[str, dict], workers: int = 2) -> dict:
    """{name: EvaluationRecord} for {name: evaluate() keyword arguments incl. `path`}."""

    def one(item):
        name, kw = item
        kw = {**SMALL, **kw}
        return name, evaluate(task, kw.pop("path"), **kw)

    with ThreadPoolExecutor(workers) as ex:
        return dict(ex.map(one, jobs.items()))
