"""One shape beyond 2³¹ elements on a GPU (evaluate/trusted/values/big_shape.py, issue 45):
which shape, planned against the free memory, skipped where it does not fit and said so in
the verdict. The GPU run itself is `tests/cheats/test_sizes.py::test_gpu_int32_offsets`."""

from kernelloop.evaluate.trusted.clock.memory_plan import beyond_int32
from kernelloop.evaluate.trusted.run import select_shapes
from kernelloop.evaluate.trusted.values import undeclared
from kernelloop.evaluate.trusted.values.big_shape import INT32, big_shape, plan_big
from kernelloop.evaluate.trusted.values.plan import Seeds, plan_calls
from kernelloop.task import load_task
from kernelloop.task.load import Task
from tests.conftest import ROOT

GiB = 1 << 30


def _closed(task: Task) -> Task:
    info = task.spec.task.model_copy(update={"closed_shapes": True})
    return Task(task.folder, task.spec.model_copy(update={"task": info}))


def test_the_flagship_shape_is_just_past_int32_at_its_widest_rows(flagship):
    gpu = select_shapes(flagship, "cuda", None)
    shape, dtype = big_shape(flagship, gpu, list(flagship.spec.dtypes))
    assert shape.dims == {"rows": 65537, "cols": 32768} and shape.tag == "undeclared"
    assert dtype == "bfloat16"  # the smallest elements
    n = shape.dims["rows"] * shape.dims["cols"]
    # (rows - 1) * cols is the last row's offset: past int32's range, where the declared
    # 65536x32768's last offset still fits
    assert n > INT32 and (shape.dims["rows"] - 1) * shape.dims["cols"] >= INT32
    assert (65536 - 1) * 32768 + 32767 < INT32
    three = load_task(ROOT / "examples" / "matmul_bias_gelu")
    s3, _ = big_shape(three, select_shapes(three, "cuda", None), ["float32"])
    assert undeclared.numel(s3.dims) > INT32 and s3.dims["M"] % 2 == 1, s3.dims


def test_planned_only_where_memory_allows_and_said_so(flagship):
    gpu = select_shapes(flagship, "cuda", None)
    dtypes = ["bfloat16", "float32"]
    fits = plan_big(flagship, gpu, dtypes, (200 * GiB, "test"), lambda s, d: 150 * GiB)
    assert fits.shape is not None and fits.shape.label == "65537x32768"
    assert fits.note.startswith("one shape beyond 2³¹ elements judged (65537x32768, bfloat16")
    short = plan_big(flagship, gpu, dtypes, (80 * GiB, "test"), lambda s, d: 150 * GiB)
    assert short.shape is None
    assert short.note == (
        "no shape beyond 2³¹ elements judged: 65537x32768 in bfloat16 needs about 150 GiB and "
        "80 GiB is free (test), so 32-bit offset overflow is not exercised on this device"
    )
    assert plan_big(_closed(flagship), gpu, dtypes, (1 << 50, "t"), lambda s, d: 0) is None
    assert beyond_int32(flagship, gpu, dtypes, "cpu") is None  # never on the CPU


def test_the_plan_runs_it_once_at_rate_0_and_the_verdict_says_which(flagship):
    gpu = select_shapes(flagship, "cuda", None)
    big = plan_big(flagship, gpu, ["bfloat16"], (200 * GiB, "t"), lambda s, d: 1)
    plan = plan_calls(flagship, gpu, ["bfloat16"], seeds=Seeds(), big=big)
    calls = [c for c in plan.calls if c.shape.label == "65537x32768"]
    assert len(calls) == 1 and calls[0].rate == 0.0 and calls[0].params["p"] == 0.0
    assert calls[0].suite == "random" and calls[0].stage == "full"
    assert "one shape beyond 2³¹ elements judged (65537x32768" in undeclared.judged_on(
        flagship, plan
    )
    short = plan_big(flagship, gpu, ["bfloat16"], (1 * GiB, "t"), lambda s, d: 2 * GiB)
    plan = plan_calls(flagship, gpu, ["bfloat16"], seeds=Seeds(), big=short)
    assert not [c for c in plan.calls if c.shape.label == "65537x32768"]
    assert "no shape beyond 2³¹ elements judged" in undeclared.judged_on(flagship, plan)


def test_on_an_h100_or_h200_the_flagship_worker_is_past_its_share_and_the_verdict_says_so(
    flagship, monkeypatch
):
    """By the per-element costs measured on the H200 (launch/worker_count: 24 B a worker,
    48 B the judge) the flagship's 65537x32768 worker needs ~50 GiB, past one of four
    workers' share of either card (0.6 x memory / 4): never planned there, and said so."""
    from kernelloop.evaluate.trusted.clock import memory_plan
    from kernelloop.evaluate.trusted.launch import worker_count

    gpu = select_shapes(flagship, "cuda", None)
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    for total in (79.6 * GiB, 139.8 * GiB):
        monkeypatch.setattr(worker_count, "_gpu_total_bytes", lambda t=total: int(t))
        monkeypatch.setattr(memory_plan, "free_memory", lambda _d, t=total: (int(t), "test"))
        big = beyond_int32(flagship, gpu, ["bfloat16"], "cuda")
        assert big.shape is None
        assert big.note.startswith(
            "no shape beyond 2³¹ elements judged: 65537x32768's correctness worker needs "
            "about 50.00 GiB, past one worker's share of this GPU"
        ), big.note
    # a card whose share holds it: planned against the free memory beside the judge
    monkeypatch.setattr(worker_count, "_gpu_total_bytes", lambda: 1024 * GiB)
    monkeypatch.setattr(memory_plan, "free_memory", lambda _d: (1024 * GiB, "test"))
    big = beyond_int32(flagship, gpu, ["bfloat16"], "cuda")
    assert big.shape is not None and big.shape.label == "65537x32768", big.note
