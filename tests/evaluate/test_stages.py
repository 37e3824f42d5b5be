"""The plan's stages and suite sizes, the round's seeds, the stage clock and compiler
errors: what makes a candidate cheap to judge, checked without a worker (issue 13)."""

import time
import traceback

import pytest

from kernelloop.evaluate.trusted.channel.text import compiler_lines
from kernelloop.evaluate.trusted.values.plan import (
    STAGES,
    Seeds,
    count_kernels,
    extreme_shapes,
    plan_calls,
)
from kernelloop.evaluate.trusted.values.stages import StageClock, summary


def _numel(shape):
    n = 1
    for v in shape.dims.values():
        n *= v
    return n


@pytest.mark.parametrize("which", ["cpu_shapes", "shapes"])
def test_the_plan_runs_cheapest_stages_first(flagship, which):
    shapes = list(getattr(flagship.spec, which))
    dtypes = list(flagship.spec.dtypes)
    plan = plan_calls(flagship, shapes, dtypes)
    stages = [c.stage for c in plan.calls]
    assert stages == sorted(stages, key=STAGES.index)  # in stage order
    smallest = min(shapes, key=_numel).label
    mid = sorted(shapes, key=_numel)[len(shapes) // 2].label
    compile_calls = [c for c in plan.calls if c.stage == "compile"]
    # compile: one call per dtype, on the smallest shape, before anything else
    assert sorted(c.dtype for c in compile_calls) == sorted(dtypes)
    assert {c.shape.label for c in compile_calls} == {smallest}
    assert {c.suite for c in compile_calls} == {"random"}
    smoke = [c for c in plan.calls if c.stage == "smoke"]
    # smoke: every extreme case on the smallest extreme shape in every dtype first (a
    # numerics failure costs a few small calls), then the mid-size shape's random calls
    tiny = min((c.shape for c in plan.calls if c.suite == "extreme"), key=_numel).label
    ext = [c for c in smoke if c.suite == "extreme"]
    assert {c.shape.label for c in ext} == {tiny}
    assert {(c.case, c.dtype) for c in ext} == {
        (case, d) for case in flagship.spec.suites.extreme for d in dtypes
    }
    assert smoke[: len(ext)] == ext
    smoke = smoke[len(ext) :]
    assert {c.shape.label for c in smoke} == {mid}
    assert {c.suite for c in smoke} == {"random", "determinism", "stochastic"}
    # random inputs before dropout: a nondeterministic kernel is named as such first
    suites = [c.suite for c in smoke if c.dtype == dtypes[0]]
    assert suites.index("determinism") < suites.index("stochastic")
    assert {c.dtype for c in smoke} == set(dtypes)
    # full starts with the extreme cases (their shapes are small)
    full = [c for c in plan.calls if c.stage == "full"]
    first_other = next(i for i, c in enumerate(full) if c.suite != "extreme")
    assert all(c.suite != "extreme" for c in full[first_other:])
    # a group's calls keep their order: the first of a pair comes before its repeat
    seen: dict[str, list[str]] = {}
    for c in plan.calls:
        if c.group:
            seen.setdefault(c.group, []).append(c.role)
    for roles in seen.values():
        assert roles[0] == "a", roles
    # State (judge_state.py): each refill right after its group's first call (the worker
    # refills that call's tensors), every determinism repeat last, largest shape first.
    for i, c in enumerate(plan.calls):
        if c.role == "refill":
            prev = plan.calls[i - 1]
            assert (prev.group, prev.role) == (c.group, "a")
            assert c.to_job()["refill"] and prev.to_job()["keep_inputs"]
    repeats = [
        i for i, c in enumerate(plan.calls) if c.role == "repeat" and c.suite == "determinism"
    ]
    full = [i for i, c in enumerate(plan.calls) if c.stage == "full"]
    assert repeats == full[-len(repeats) :]
    sizes = [_numel(plan.calls[i].shape) for i in repeats]
    assert sizes == sorted(sizes, reverse=True)


def test_extreme_cases_run_on_every_row_length_with_the_fewest_rows(flagship):
    gpu = list(flagship.spec.shapes)
    ext = extreme_shapes(flagship, gpu)
    fewest = min(s.dims["rows"] for s in gpu)
    assert {s.dims["cols"] for s in ext} == {s.dims["cols"] for s in gpu}  # every row length
    assert {s.dims["rows"] for s in ext} == {fewest}
    assert len(ext) == len({s.dims["cols"] for s in gpu})  # no duplicate
    plan = plan_calls(flagship, gpu, list(flagship.spec.dtypes))
    extreme = [c for c in plan.calls if c.suite == "extreme"]
    cases = set(flagship.spec.suites.extreme)
    for s in ext:
        for d in flagship.spec.dtypes:
            assert {c.case for c in extreme if c.shape.label == s.label and c.dtype == d} == cases
    # random, stochastic and determinism keep the full shapes
    for suite in ("random", "stochastic", "determinism"):
        full = {
            c.shape.label for c in plan.calls if c.suite == suite and c.shape.tag != "undeclared"
        }
        assert full == {s.label for s in gpu}, suite
    # far fewer elements than every extreme case on every full shape
    before = sum(_numel(s) for s in gpu)
    after = sum(_numel(s) for s in ext)
    assert after * 6 < before


def test_a_task_without_extreme_shrink_keeps_its_shapes(flagship):
    spec = flagship.spec.model_copy(
        update={"suites": flagship.spec.suites.model_copy(update={"extreme_shrink": []})}
    )
    task = type(flagship).__new__(type(flagship))
    task.__dict__.update(flagship.__dict__, spec=spec)
    gpu = list(flagship.spec.shapes)
    assert [s.label for s in extreme_shapes(task, gpu)] == [s.label for s in gpu]


def test_a_round_shares_its_seeds_and_a_new_round_does_not(flagship):
    shapes, dtypes = list(flagship.spec.cpu_shapes), ["float32"]
    rnd = Seeds()
    a = plan_calls(flagship, shapes, dtypes, seeds=rnd)
    b = plan_calls(flagship, shapes, dtypes, seeds=Seeds(rnd.key))
    c = plan_calls(flagship, shapes, dtypes, seeds=Seeds())
    key = [(x.id, x.input_seed, x.params.get("seed"), x.shape.label) for x in a.calls]
    assert key == [(x.id, x.input_seed, x.params.get("seed"), x.shape.label) for x in b.calls]
    assert {x.input_seed for x in a.calls}.isdisjoint({x.input_seed for x in c.calls})
    # within a plan: pairs share inputs (and seeds where they must), everything else differs
    by = {x.id: x for x in a.calls}
    det = [x for x in a.calls if x.suite == "determinism"]
    for x in det:
        roles = {y.role: y for y in det if y.group == x.group}
        first, refill = roles["a"], roles["refill"]
        assert (x.params["seed"]) == first.params["seed"]  # one seed for the whole group
        # the repeat: a's inputs again; the refill: new values (in a's buffers, worker side)
        assert roles["repeat"].input_seed == first.input_seed != refill.input_seed
    for x in a.calls:
        if x.role == "other_seed":
            first = by[x.id.replace("other_seed", "a")]
            assert x.input_seed == first.input_seed and x.params["seed"] != first.params["seed"]
    singles = [x.input_seed for x in a.calls if not x.group]
    assert len(set(singles)) == len(singles)


def test_the_stage_clock_marks_the_failed_stage_and_what_never_ran(flagship):
    plan = plan_calls(flagship, list(flagship.spec.cpu_shapes), ["float32"])
    said: list[str] = []
    clock = StageClock(plan, said.append)
    clock.advance("start")
    clock.advance("compile")
    for c in [c for c in plan.calls if c.stage == "compile"]:
        clock.judged(c.stage, failed=False)
    smoke = [c for c in plan.calls if c.stage == "smoke"]
    clock.judged(smoke[0].stage, failed=False)
    time.sleep(0.01)
    clock.judged(smoke[1].stage, failed=True)
    clock.close("failed")
    stages = {s.name: s for s in clock.stages()}
    assert [s.name for s in clock.stages()] == [
        "static",
        "start",
        "compile",
        "smoke",
        "full",
        "e2e",
        "timing",
    ]
    assert stages["compile"].status == "passed" and stages["compile"].calls == 1
    assert stages["smoke"].status == "failed" and stages["smoke"].calls == 2
    assert stages["smoke"].seconds >= 0.01
    assert stages["full"].status == "not run" and stages["timing"].status == "not run"
    assert any(m.startswith("compile passed") for m in said)
    line = summary(clock.stages())
    assert "smoke 0.0 s (failed)" in line and line.endswith("never ran: full, timing"), line


def test_on_passed_hooks_run_once_as_their_stage_passes_and_never_after_a_failure(flagship):
    plan = plan_calls(flagship, list(flagship.spec.cpu_shapes), ["float32"])
    seen: list[tuple[str, str | None]] = []
    hooks = {
        name: (lambda name=name: seen.append((name, clock.current)))
        for name in ("start", "smoke", "full")
    }
    clock = StageClock(plan, on_passed=hooks)
    clock.advance("start")
    assert seen == []  # the workers are starting: not yet
    clock.advance("compile")  # the first hello
    clock.advance("compile")  # another worker's hello
    assert seen == [("start", "start")]
    for c in [c for c in plan.calls if c.stage in ("compile", "smoke")]:
        clock.judged(c.stage, failed=False)
    assert seen == [("start", "start"), ("smoke", "smoke")]  # once, as smoke closed
    # A failure in the full stage: its hook never runs.
    clock.judged("full", failed=True)
    clock.close("failed")
    assert [name for name, _ in seen] == ["start", "smoke"]
    # A smoke failure: the smoke hook never runs either.
    seen.clear()
    clock = StageClock(plan, on_passed=hooks)
    clock.advance("compile")
    for c in [c for c in plan.calls if c.stage == "compile"]:
        clock.judged(c.stage, failed=False)
    clock.judged("smoke", failed=True)
    clock.close("failed")
    assert [name for name, _ in seen] == ["start"]


def test_a_passing_evaluation_without_timing_says_why(flagship):
    plan = plan_calls(flagship, [flagship.find_shape("7x129")], ["float32"])
    clock = StageClock(plan)
    clock.advance("compile")
    for c in plan.calls:
        clock.judged(c.stage, failed=False)
    clock.close("passed", through="full")
    stages = {s.name: s.status for s in clock.stages(timing="skipped")}
    assert stages == {
        "static": "passed",
        "start": "passed",
        "compile": "passed",
        "smoke": "passed",
        "full": "passed",
        "e2e": "skipped",  # the plan has no e2e calls
        "timing": "skipped",
    }


def _traceback(exc: BaseException) -> str:
    try:
        raise exc
    except BaseException as e:  # noqa: BLE001
        return "".join(traceback.format_exception(type(e), e, e.__traceback__))


def test_a_compiler_error_goes_back_as_its_first_lines():
    import ast

    from triton.compiler.errors import CompilationError

    src = "def k(x_ptr):\n    offs = 1\n    y = tl.load(x_ptr + offs, mask=m)\n    return y\n"
    node = ast.parse(src).body[0].body[1]
    text = _traceback(CompilationError(src, node, "NameError('m is not defined')"))
    got = compiler_lines(text)
    assert got is not None and got.startswith("«CompilationError: at 3:4:")
    assert "y = tl.load(x_ptr + offs, mask=m)" in got and "m is not defined" in got
    assert "def k" not in got  # only the line the caret points at, not the whole excerpt
    nvcc = _traceback(
        RuntimeError(
            "Error building extension 'k': [1/2] nvcc -c k.cu\nFAILED: k.o\n"
            'k.cu(12): error: identifier "foo" is undefined\n1 error detected'
        )
    )
    assert 'identifier "foo" is undefined' in compiler_lines(nvcc)
    assert compiler_lines(_traceback(RuntimeError("illegal memory access"))) is None
    assert compiler_lines(None) is None


def test_a_cuda_cpp_task_counts_the_kernels_of_its_compile_calls_on_a_gpu_only(flagship):
    # A C++ candidate's <<<>>> launches are invisible to Triton's launch hook: on a GPU its
    # compile-stage calls (one per dtype) are traced with the GPU's activity, and only they
    # (the trace costs a CUPTI start per call).
    plan = plan_calls(flagship, list(flagship.spec.shapes), list(flagship.spec.dtypes))
    count_kernels(plan, "cuda", "cuda")
    counted = [c for c in plan.calls if c.count_kernels]
    assert counted == [c for c in plan.calls if c.stage == "compile"]
    assert len(counted) == len(flagship.spec.dtypes)
    assert all(c.to_job().get("count_kernels") is True for c in counted)
    assert not any("count_kernels" in c.to_job() for c in plan.calls if not c.count_kernels)
    for device, language in (("cpu", "cuda"), ("cuda", "triton")):
        count_kernels(plan, device, language)
        assert not any(c.count_kernels for c in plan.calls)
