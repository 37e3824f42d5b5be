"""Several correctness workers per evaluation (issue 13): how the plan is split, how their
channels are read by one judge, and the stage clock when their calls interleave."""

import threading
import time
from collections import Counter

import pytest

from kernelloop.evaluate.trusted.values import shards
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.plan import STAGES, plan_calls
from kernelloop.evaluate.trusted.values.stages import StageClock


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("which", ["cpu_shapes", "shapes"])
def test_every_call_runs_once_in_plan_order_with_its_group(flagship, which, n):
    plan = plan_calls(flagship, list(getattr(flagship.spec, which)), list(flagship.spec.dtypes))
    parts = shards.split(plan, n)
    assert len(parts) == n
    ids = [c.id for p in parts for c in p.calls]
    assert sorted(ids) == sorted(c.id for c in plan.calls)  # every call, once
    order = {c.id: i for i, c in enumerate(plan.calls)}
    for p in parts:
        mine = [order[c.id] for c in p.calls]
        assert mine == sorted(mine)  # the plan's order: stages cheapest first
    home = {c.id: k for k, p in enumerate(parts) for c in p.calls}
    groups: dict[str, set[int]] = {}
    for c in plan.calls:
        if c.group:
            groups.setdefault(c.group, set()).add(home[c.id])
    assert groups and all(len(v) == 1 for v in groups.values())  # a group never split
    # each stage's work is shared: no shard is left without smoke and full calls
    for stage in ("smoke", "full"):
        assert all(any(c.stage == stage for c in p.calls) for p in parts), stage

    def cost(p):
        return sum(shards._numel(c) + shards.CALL_OVERHEAD for c in p.calls)

    costs = sorted(cost(p) for p in parts)
    biggest = max(shards._numel(c) + shards.CALL_OVERHEAD for c in plan.calls)
    assert costs[-1] - costs[0] <= 3 * biggest  # balanced to within a few calls


def test_one_worker_or_one_call_is_the_plan_itself(flagship):
    plan = plan_calls(flagship, [flagship.find_shape("7x129")], ["float32"])
    assert shards.split(plan, 1) == [plan]
    plan.calls = plan.calls[:1]
    assert shards.split(plan, 4) == [plan]


def test_the_clock_waits_for_every_worker_before_a_stage_ends(flagship):
    """Worker B's smoke calls are judged while worker A still has a compile call: compile
    ends only with A's call, and smoke ends right after it if B already finished it."""
    plan = plan_calls(flagship, list(flagship.spec.cpu_shapes), ["float32", "float16"])
    clock = StageClock(plan)
    clock.advance("compile")
    by = Counter(c.stage for c in plan.calls)
    compile_calls = [c for c in plan.calls if c.stage == "compile"]
    assert len(compile_calls) == 2
    clock.judged("compile", failed=False)
    for _ in range(by["smoke"]):
        clock.judged("smoke", failed=False)
    assert clock.current == "compile"  # one compile call left in the other worker
    time.sleep(0.01)
    clock.judged("compile", failed=False)
    assert clock.current == "full"
    for _ in range(by["full"]):
        clock.judged("full", failed=False)
    clock.close("passed", through="full")
    st = {s.name: s for s in clock.stages()}
    assert st["compile"].seconds >= 0.01 and st["compile"].calls == 2
    assert st["smoke"].calls == by["smoke"] and st["smoke"].status == "passed"
    assert st["full"].status == "passed"


def test_a_failure_ahead_of_another_worker_stops_the_stages_before_it(flagship):
    plan = plan_calls(flagship, list(flagship.spec.cpu_shapes), ["float32", "float16"])
    clock = StageClock(plan)
    clock.advance("compile")
    clock.judged("compile", failed=False)  # one of two compile calls
    clock.judged("smoke", failed=False)
    clock.judged("smoke", failed=True)  # the other worker ran ahead and failed
    clock.judged("compile", failed=False)  # late: no stage ends after a failure
    clock.close("failed")
    st = {s.name: s.status for s in clock.stages()}
    assert st == {
        "static": "passed",
        "start": "passed",
        "compile": "passed",  # every compile call was judged, none failed
        "smoke": "failed",
        "full": "not run",
        "e2e": "skipped",  # this plan has no e2e call: nothing there could run (issue 47)
        "timing": "not run",
    }
    clock = StageClock(plan)
    clock.advance("compile")
    clock.judged("smoke", failed=True)  # before any compile call came back
    clock.close("failed")
    st = {s.name: s.status for s in clock.stages()}
    assert st["compile"] == "stopped" and st["smoke"] == "failed"


class _Proc:
    """Stands in for SandboxProcess: lines (with a pause between them) until stopped."""

    def __init__(self, lines: list[bytes], pause: float = 0.0) -> None:
        self._lines, self.pause, self.stopped = lines, pause, False

    def lines(self):
        for raw in self._lines:
            if self.stopped:
                return
            time.sleep(self.pause)
            yield raw

    def stop(self) -> None:
        self.stopped = True


def _line(key: str, **msg) -> bytes:
    import json

    return (json.dumps({**msg, "key": key}) + "\n").encode()


def _lanes(flagship, tmp_path, parts, script):
    """Fake workers over real channel readers and out dirs: `script[k]` is (pause before
    each line, call ids to send as raised errors) for part k."""
    from kernelloop.evaluate.trusted.channel.outputs import OutputDir

    hello = {
        "type": "hello",
        "env": {"device": "cpu", "torch": "2", "python": "3", "interpreter": True},
    }
    lanes, procs = [], []
    for k, part in enumerate(parts):
        pause, ids = script[k]
        key = f"{k}" * 32
        lines = [_line(key, **hello)]
        lines += [_line(key, type="call", id=i, ok=False, error="RuntimeError: boom") for i in ids]
        (tmp_path / f"o{k}").mkdir()
        procs.append(_Proc(lines, pause))
        lanes.append(shards.Lane(procs[-1], part, OutputDir(tmp_path / f"o{k}"), key, 100))
    return lanes, procs


def test_the_verdict_is_the_first_failure_in_plan_order_whoever_sends_it_first(flagship, tmp_path):
    """Real channel readers and the real judge: the worker whose first call comes later in
    the plan fails first; the other is not stopped until its own earlier call is judged,
    and that failure is the verdict's first, as with one worker."""
    plan = plan_calls(flagship, [flagship.find_shape("7x129")], ["float32"])
    parts = shards.split(plan, 2)
    order = {c.id: i for i, c in enumerate(plan.calls)}
    early, late = sorted(parts, key=lambda p: order[p.calls[0].id])
    lanes, procs = _lanes(
        flagship,
        tmp_path,
        [early, late],
        [(0.3, [early.calls[0].id]), (0.02, [late.calls[0].id])],
    )
    judge = Judge(flagship, "cpu")
    clock = StageClock(plan)
    shards.consume(lanes, judge, lambda _m: None, clock, stop_at_failure=True, plan=plan)
    assert all(p.stopped for p in procs)
    assert len(judge.failures) == 2
    first = early.calls[0]
    assert judge.failures[0].reason.startswith(f"{first.suite}/{first.case}")
    assert "raised" in judge.failures[0].reason
    for lane in lanes:
        lane.outputs.close()


def test_a_worker_claiming_another_ones_call_breaks_its_own_channel(flagship, tmp_path):
    plan = plan_calls(flagship, [flagship.find_shape("7x129")], ["float32"])
    a, b = shards.split(plan, 2)
    lanes, procs = _lanes(
        flagship, tmp_path, [a, b], [(0.2, [a.calls[0].id]), (0.01, [a.calls[-1].id])]
    )
    judge = Judge(flagship, "cpu")
    states = shards.consume(
        lanes, judge, lambda _m: None, StageClock(plan), stop_at_failure=True, plan=plan
    )
    assert "unknown or repeated call id" in states[1]["protocol"]
    assert states[0]["seen"] == {a.calls[0].id} and not states[1]["seen"]
    assert procs[0].stopped  # its own failure stopped it
    assert len(judge.failures) == 1
    for lane in lanes:
        lane.outputs.close()
    assert threading.active_count() < 20


def test_stages_are_all_in_order():
    assert list(STAGES) == ["compile", "smoke", "full", "e2e"]


@pytest.mark.parametrize("n", [2, 3])
def test_calls_of_one_shape_and_dtype_stay_together_where_the_balance_allows(flagship, n):
    """A kind (shape, dtype) met by two workers is compiled by both: kept together, the
    workers compile different specialisations in parallel."""
    plan = plan_calls(flagship, list(flagship.spec.shapes), list(flagship.spec.dtypes))
    parts = shards.split(plan, n)
    kinds = [{shards._kind([c]) for c in p.calls} for p in parts]
    distinct = len(set().union(*kinds))
    # the one-by-one split met 37 kinds in 2 workers for 25 distinct ones; with the
    # determinism refill call (issue 33) each shape's kind is heavier, and in 2 workers one
    # more kind is split (29 for 26, 2026-12-03)
    assert sum(len(k) for k in kinds) <= distinct + n + 1, [len(k) for k in kinds]


def test_a_gpu_gets_as_many_workers_as_its_memory_and_cores_hold(flagship, monkeypatch):
    """Up to four correctness workers on a GPU (compiles in parallel), fewer where the
    task's largest shape would not fit four times in the GPU's share beside the judge's own
    memory, or cores are few."""
    import types

    from kernelloop.evaluate.trusted.launch import worker_count as run
    from kernelloop.task.spec import Shape

    h200 = types.SimpleNamespace(total_memory=150_000_000_000)
    monkeypatch.setattr(run.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(run.torch.cuda, "get_device_properties", lambda _i: h200)
    monkeypatch.setattr(run.os, "cpu_count", lambda: 16)
    assert run.default_workers("cuda", flagship) == 4  # 16384 x 8192 at most
    assert run.default_workers("cuda") == 2  # no task: the old default

    def sized(*dims: dict) -> object:
        spec = flagship.spec.model_copy(update={"shapes": [Shape(dims=d) for d in dims]})
        return types.SimpleNamespace(spec=spec)

    # KernelBench level1/23 at its size: 36.6 GB per worker measured; two fit the workers'
    # share, but not beside the judge's float64 reference (~48 B per element): on the H200
    # (2026-12-05) two workers left the judge out of memory on 4 of 5 gate-check mutants.
    big = sized({"batch_size": 4096, "dim": 393216})
    assert run.default_workers("cuda", big) == 1
    monkeypatch.setattr(run, "JUDGE_BYTES_PER_ELEMENT", 0)  # the old rule, for the record
    monkeypatch.setattr(run, "JUDGE_FIXED_BYTES", 0)
    assert run.default_workers("cuda", big) == 2
    monkeypatch.undo()
    monkeypatch.setattr(run.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(run.torch.cuda, "get_device_properties", lambda _i: h200)
    monkeypatch.setattr(run.os, "cpu_count", lambda: 16)
    # A matmul's M x N x K overstates its tensors: fewer workers, never too many.
    assert run.default_workers("cuda", sized({"m": 8192, "n": 8192, "k": 8192})) == 1
    monkeypatch.setattr(run.os, "cpu_count", lambda: 4)
    assert run.default_workers("cuda", flagship) == 2
