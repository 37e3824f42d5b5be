"""A run whose speed was never measured (Triton in the CPU interpreter, as the loop stores
it: correctness records, no benchmark record) and that has not finished: the report says
so instead of showing numbers, its checklist fails what cannot be shown and marks n/a what
the device cannot measure."""

from kernelloop.evaluate.trusted.values.record import (
    CheckResult,
    Environment,
    EvaluationRecord,
    Verdict,
)
from kernelloop.history import HistoryStore
from kernelloop.report import write_report
from kernelloop.task import load_task
from tests.loop.test_measured_cpu import CPU_TASK


def test_unmeasured_unfinished_run(tmp_path):
    task = load_task(CPU_TASK)
    record = EvaluationRecord(
        task=task.name,
        task_digest="d",
        candidate="baseline.py",
        candidate_sha256="ab",
        started_at="t",
        wall_s=3.0,
        environment=Environment(
            device="cpu",
            device_name="x86_64",
            torch="2.13",
            python="3.11",
            sandbox="bwrap",
            interpreter=True,
        ),
        checks=[
            CheckResult(suite="random", case="a", shape="256x1024", dtype="float32", passed=True)
        ],
        verdict=Verdict(accepted=True, category="accepted"),
    )
    with HistoryStore.open(tmp_path / "history.sqlite") as store:
        run = store.start_run(task.name, "d", agent="tuner", device_name="x86_64", arch="cpu")
        base = store.add_proposal(run, 0, source="x = 1\n", hypothesis="baseline", agent="baseline")
        store.add_evaluation(base, record, objective=1.0, per_shape={})
        store.set_best(run, base)
        pid = store.add_proposal(
            run, 1, source="x = 2\n", hypothesis="bigger block", agent="tuner", parent_id=base
        )
        store.add_evaluation(
            pid,
            record,
            objective=None,
            per_shape={},
            verdict=Verdict(
                accepted=False,
                category="timing",
                reasons=["correct, but timings on this device do not count"],
            ),
        )
        # As the loop stores it today: the correctness record's verdict, no objective.
        now = store.add_proposal(
            run, 2, source="x = 3\n", hypothesis="fused rows", agent="tuner", parent_id=base
        )
        store.add_evaluation(now, record, objective=None, per_shape={})
        md = write_report(store, task.name, task.spec.rules, tmp_path / "out").markdown.read_text()
    assert "No benchmark record is stored for the best: its speed was not measured" in md
    # A device that cannot time is n/a there, not a red fail (issue 36).
    assert (
        "- [ ] **n/a** The timings count (measured on the device, not in an interpreter): "
        "speed is not measured on this device (Triton interpreter)" in md
    )
    assert (
        "- [ ] **n/a** The best carries its benchmark record" in md
    )  # the baseline is still the best
    assert "- [ ] **fail** The run ended without calling for review: the run has not finished" in md
    assert "| 2 | r1-1 | tuner | bigger block | none given | judged correct, not timed" in md
    assert "| #2 | r1-1 | rejected [timing] | – |" in md
    # Correct but never timed is said so in the tables, never "accepted" (the gate's word).
    assert (
        "| tuner | fused rows | none given | judged correct, not timed (timings on this device "
        "do not count) | – | judged correct, not timed |" in md
    ), md
    assert "r2-1 #3 judged correct, not timed" in md, md
    assert "| #3 | r2-1 | judged correct, not timed | – |" in md and "| accepted |" not in md, md
    assert "x86_64 (cpu, Triton interpreter)" in md and "Wall time of the run: not known" in md
