"""Code-level facts of a compiled Triton kernel (issue 16): the specialization it was
built for, TTGIR layout conversions, a PTX instruction mix. The kernel is really compiled
for sm_90 (Triton compiles for a target without a GPU), so the IR counted is Triton's
own; on the trusted side the facts pass the channel's schema and render as one labelled
line, and a hostile value is refused by the schema."""

from __future__ import annotations

import pydantic
import pytest
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernelloop.evaluate.trusted.channel.messages import validate
from kernelloop.evaluate.trusted.values.record import KernelInfo
from kernelloop.evaluate.worker.calls import code_facts


@triton.jit
def _transpose(x_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(y_ptr + c[:, None] * R + r[None, :], tl.trans(x))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
    try:
        sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "R": "constexpr", "C": "constexpr"}
        src = ASTSource(_transpose, sig, constexprs={"R": 64, "C": 32})
        yield triton.compile(src, target=GPUTarget("cuda", 90, 32))
    finally:
        mp.undo()


def test_a_transpose_shows_its_layout_conversion_and_specialization(compiled):
    facts = code_facts(compiled)
    assert facts["specialization"] == "pointers bf16, R=64, C=32"
    assert facts["convert_layouts"] == compiled.asm["ttgir"].count("ttg.convert_layout") >= 1
    assert facts["ptx_mix"]["global loads"] > 0 and facts["ptx_mix"]["global stores"] > 0


def test_the_facts_pass_the_channel_schema_and_render_labelled(compiled):
    kernel = {"impl": "candidate", "name": "_transpose", "n_regs": 40, "n_spills": 0,
              "shared_bytes": 0, "num_warps": 4, **code_facts(compiled)}  # fmt: skip
    msg = validate({"type": "compile", "key": "k", "kernels": [kernel]})
    info = KernelInfo(**{k: v for k, v in msg["kernels"][0].items() if k != "impl"})
    line = info.describe()
    assert line.startswith("Kernel _transpose [pointers bf16, R=64, C=32]: 40 registers/thread")
    assert "layout conversions (TTGIR convert_layout)" in line and "PTX mix global" in line


def test_hostile_code_facts_are_refused_by_the_schema():
    bad = {"impl": "candidate", "name": "k", "specialization": "\x1b]8;;evil\x07"}
    with pytest.raises(pydantic.ValidationError):
        validate({"type": "compile", "key": "k", "kernels": [bad]})
    too_many = {"impl": "candidate", "name": "k", "ptx_mix": {f"op{i}": 1 for i in range(40)}}
    with pytest.raises(pydantic.ValidationError):
        validate({"type": "compile", "key": "k", "kernels": [too_many]})
