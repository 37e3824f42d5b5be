"""A failed value check says where and by how much: the worst element's index, the
reference's value and the candidate's (issue 16: feedback an agent can act on); a Triton
compile error keeps the compiler's first lines, not only the traceback's last one."""

from __future__ import annotations

import ast
import traceback

import torch
from triton.compiler.errors import CompilationError

from kernelloop.evaluate.trusted.channel.text import COMPILER_CHARS, compiler_lines, last_line
from kernelloop.evaluate.trusted.values.compare import within_tolerance
from kernelloop.evaluate.trusted.values.compare_mask import infer_mask
from kernelloop.task.spec import Tolerance

TOL = Tolerance(atol=1e-5, rtol=1e-3)


def test_the_reason_names_the_worst_element_with_expected_and_got():
    ref = torch.linspace(1, 2, 12, dtype=torch.float64).reshape(3, 4)
    out = ref.clone().to(torch.float32)
    out[2, 1] = 7.5  # the worst
    out[0, 3] = ref[0, 3] * 1.01  # also outside, less so
    cmp = within_tolerance(out, ref, TOL)
    assert not cmp.passed and cmp.worst_index == [2, 1]
    assert f"worst at [2, 1]: expected {float(ref[2, 1]):.6g}, got 7.5" in cmp.reason
    assert cmp.reason.startswith("2 of 12 elements outside")


def test_a_non_finite_output_names_its_first_position_and_values():
    ref = torch.ones(2, 3, dtype=torch.float64)
    out = torch.ones(2, 3)
    out[1, 2] = float("nan")
    cmp = within_tolerance(out, ref, TOL)
    assert cmp.category == "nonfinite" and "first at [1, 2]: expected 1, got nan" in cmp.reason


def test_a_reference_beyond_the_output_dtypes_range_expects_its_infinity():
    """A float64 reference past float32's (or float16's) largest value rounds to infinity
    in the output's dtype: that infinity is the right answer, anything finite is not."""
    ref = torch.tensor([1e39, -1e39, 1.0, 7e4], dtype=torch.float64)
    out = ref.to(torch.float32)  # inf, -inf, 1, 7e4
    assert within_tolerance(out, ref, TOL).passed
    saturated = out.clone()
    saturated[0] = torch.finfo(torch.float32).max
    assert not within_tolerance(saturated, ref, TOL).passed
    wrong_sign = out.clone()
    wrong_sign[1] = float("inf")
    assert not within_tolerance(wrong_sign, ref, TOL).passed
    half = ref.to(torch.float16)  # 7e4 is past float16's 65504 as well
    assert torch.isinf(half[3]) and within_tolerance(half, ref, TOL).passed
    # a float32 infinity where the reference is finite in float32's range still fails
    early = out.clone()
    early[2] = float("inf")
    assert within_tolerance(early, ref, TOL).category == "nonfinite"


def test_a_value_neither_kept_nor_dropped_names_both_candidates():
    keep = torch.full((2, 4), 2.0, dtype=torch.float64)
    drop = torch.zeros(2, 4, dtype=torch.float64)
    out = keep.clone()
    out[1, 3] = 1.0
    inf = infer_mask(out, keep, drop, TOL)
    assert not inf.ok
    assert "worst at [1, 3]: kept value 2, dropped value 0, got 1" in inf.reason


def test_a_wrong_value_is_described_as_a_value_before_any_dropout_term():
    """Issue 47: a LayerNorm variance bug (1/(n-1)) read "neither a kept nor a dropped
    value". The value check's own diagnosis leads: which reference value the output is
    nearest, expected and got, and that the error is in the computed values."""
    keep = torch.linspace(-1, 1, 8, dtype=torch.float64).reshape(2, 4)
    drop = torch.full((2, 4), 3.0, dtype=torch.float64)
    out = (keep * 1.004).to(torch.float32)  # every kept value scaled by a wrong rstd
    out[0, 0] = 3.0  # one element dropped, right
    inf = infer_mask(out, keep, drop, TOL)
    assert not inf.ok
    lead, _, dropout = inf.reason.partition("; in dropout terms, ")
    assert "elements are wrong values" in lead and "its kept value" in lead, inf.reason
    assert "worst at [1, 3]: expected 1, its kept value, got 1.004" in lead, inf.reason
    assert "neither a kept nor a dropped value" in dropout and "neither" not in lead


def _compile_error_text() -> str:
    src = "def k(x_ptr, BLOCK: tl.constexpr):\n    x = tl.load(x_ptr)\n    y = tl.foo(x)\n"
    node = ast.parse(src).body[0].body[1]
    try:
        try:
            raise AttributeError("module 'triton.language' has no attribute 'foo'")
        except AttributeError as e:
            raise CompilationError(src, node, repr(e)) from e
    except CompilationError as e:
        return "".join(traceback.format_exception(type(e), e, e.__traceback__))


def test_a_compile_error_keeps_where_the_source_line_and_the_message():
    text = _compile_error_text()
    got = compiler_lines(text)
    assert got is not None and got.startswith("«CompilationError: at 3:4:")
    assert "y = tl.foo(x)" in got and "has no attribute 'foo'" in got


def test_any_other_error_is_its_last_line_and_candidate_text_stays_quoted():
    text = "Traceback (most recent call last):\nValueError: boom"
    assert compiler_lines(text) is None and last_line(text) == "«ValueError: boom»"
    # A forged compiler header with escape sequences is still cleaned and capped.
    forged = "x.CompilationError: at 1:0:\n\x1b[31mevil\n^\n" + "A" * 5000
    out = compiler_lines(forged)
    assert "\x1b" not in out and len(out) <= COMPILER_CHARS + 2 and out.startswith("«")


def test_the_comparison_in_chunks_says_what_it_says_whole(monkeypatch):
    # A 6.4 GB output compared whole needed ~64 GB of float64 temporaries on the trusted
    # side (H200, 2026-12-01): it is compared in chunks. Verdicts, counts, maxima and the
    # first worst index must not depend on the chunk size.
    import kernelloop.evaluate.trusted.values.compare as compare

    g = torch.Generator().manual_seed(3)
    ref = torch.randn(37, 29, generator=g, dtype=torch.float64)
    ref[30, 2] = ref[5, 7]
    cases = {"close": ref + 1e-9}
    off = ref.clone()
    off[5, 7] += 1.0
    off[30, 2] += 1.0  # the same error at the same value twice: the first is named
    off[20, 20] += 0.5
    cases["off"] = off
    nan = ref.clone()
    nan[9, 3], nan[33, 1] = float("nan"), float("inf")
    cases["nonfinite"] = nan
    inf_ref = ref.clone()
    inf_ref[11, 11] = float("inf")
    cases["inf"] = (ref.clone(), inf_ref)
    for name, case in cases.items():
        out, r = case if isinstance(case, tuple) else (case, ref)
        monkeypatch.setattr(compare, "CHUNK", 1 << 24)
        whole = within_tolerance(out.float(), r, TOL)
        monkeypatch.setattr(compare, "CHUNK", 64)
        chunked = within_tolerance(out.float(), r, TOL)
        assert chunked == whole, name
    assert not whole.passed and "differs where the reference is infinite" in whole.reason
    off_cmp = within_tolerance(off.float(), ref, TOL)
    assert off_cmp.worst_index == [5, 7] and off_cmp.reason.startswith("3 of 1073")
    assert within_tolerance(nan.float(), ref, TOL).reason.startswith("2 non-finite")


def test_a_cpp_build_error_is_its_first_compiler_lines():
    from kernelloop.evaluate.trusted.channel.text import import_reason

    log = (
        "Traceback (most recent call last):\n"
        '  File "/sandbox/cand.py", line 30, in <module>\n'
        "RuntimeError: Error building extension 'ext': [1/2] c++ -MMD -MF main.o.d "
        + "-I/venv/include "
        * 200
        + "-c /home/sandbox/.cache/torch_extensions/ext/main.cpp -o main.o\n"
        "FAILED: main.o\n"
        "/home/sandbox/.cache/torch_extensions/ext/main.cpp: In lambda function:\n"
        "/home/sandbox/.cache/torch_extensions/ext/main.cpp:17:23: error: expected ';'\n"
        "/home/sandbox/.cache/torch_extensions/ext/main.cpp:17:23: error: expected ';'\n"
        "/home/sandbox/.cache/torch_extensions/ext/cuda.cu(12): error: identifier x is undefined\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    assert import_reason(log) == (
        "«RuntimeError: Error building extension 'ext': main.cpp:17:23: error: expected ';' "
        "cuda.cu(12): error: identifier x is undefined»"
    )
