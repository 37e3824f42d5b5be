"""Helpers that run inside the worker process (untrusted side) around each candidate call."""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

import torch

from kernelloop.evaluate.protocol import ALLOC_VIEW_OPS  # noqa: F401  (the recorder's filter lives with the judge's)
from kernelloop.evaluate.worker.op_audit import (  # noqa: F401  (the worker's names)
    LAUNCH_MARK,
    AtenRecorder,
    LaunchCounter,
    OpAudit,
    OpTrace,
    TimedLaunchAudit,
    count_device_kernels,
    ops_outside_launches,
)

# What fresh memory holds before a call, drawn per call (issue 45): NaN bytes (an output
# never written reads as non-finite), zeros (a fresh page), stale floats (an earlier
# tensor's values) or random bytes. Never one constant a kernel could recognise: a kernel
# that behaves only when its fresh buffer holds the poison misbehaves on the other calls.
POISONS = ("nan", "zeros", "stale", "bytes")


def poison(nbytes: int, device: str) -> str:
    """Fill the memory the call's output will most likely get with a poison drawn for this
    call (from os.urandom: nothing in the process predicts it); returns its name.

    GPU: the CUDA caching allocator hands the next allocation of this size class this
    block. CPU: a block of exactly the output's size, freed, is the chunk glibc's best fit
    hands the next allocation of that size (the CPU shapes stay below its mmap threshold).
    Without this, `torch.empty` can return memory holding an earlier result.
    """
    if nbytes <= 0:
        return ""
    draw = int.from_bytes(os.urandom(8), "little")
    kind = POISONS[draw % len(POISONS)]
    size = nbytes + 512 if device == "cuda" else nbytes
    # Three blocks on the CPU: glibc's small bins do not always hand back the last chunk freed.
    blocks = [
        torch.empty(size, dtype=torch.uint8, device=device)
        for _ in range(1 if device == "cuda" else 3)
    ]
    g = torch.Generator(device=device).manual_seed(draw >> 8)
    for block in blocks:
        if kind == "nan":
            block.fill_(0xFF)  # 0xFFFF… is NaN in fp16, bf16 and fp32
        elif kind == "zeros":
            block.zero_()
        elif kind == "bytes":
            block.random_(0, 256, generator=g)
        else:  # stale float32 values, as an earlier activation leaves them
            words = block[: size // 4 * 4].view(torch.float32)
            words.normal_(0.0, 2.0 ** ((draw >> 40) % 8), generator=g)
    del blocks, block
    return kind


def aliased_inputs(out: torch.Tensor, tensors: dict[str, torch.Tensor]) -> list[str]:
    def span(t: torch.Tensor) -> tuple[int, int]:
        st = t.untyped_storage()
        return st.data_ptr(), st.data_ptr() + st.nbytes()

    o0, o1 = span(out)
    hits = []
    for name, t in tensors.items():
        a0, a1 = span(t)
        if o0 < a1 and a0 < o1 and t.device == out.device:
            hits.append(name)
    return hits


MAX_PARTS = 16


def output_parts(out) -> list[torch.Tensor] | None:
    """A call's output as tensors: [out] for a tensor, its items for a tuple or list of 1 to
    MAX_PARTS tensors (each exactly a torch.Tensor), None for anything else."""
    if type(out) is torch.Tensor:
        return [out]
    if (
        type(out) in (tuple, list)
        and 0 < len(out) <= MAX_PARTS
        and all(type(o) is torch.Tensor for o in out)
    ):
        return list(out)
    return None


def packed(parts: list[torch.Tensor]) -> torch.Tensor:
    """The output as one tensor: a single tensor itself; several, every one's bytes in order
    (a uint8 vector: what is committed to, written and audited)."""
    if len(parts) == 1:
        return parts[0].detach()
    return torch.cat([p.detach().contiguous().reshape(-1).view(torch.uint8) for p in parts])


def pack_output(out) -> torch.Tensor | None:
    """`packed(output_parts(out))`, or None when the output is not tensors."""
    parts = output_parts(out)
    return None if parts is None else packed(parts)


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    av = a.contiguous().reshape(-1).view(torch.uint8)
    bv = b.contiguous().reshape(-1).view(torch.uint8)
    return bool(torch.equal(av, bv))


def wait_for_room(out_dir: Path, max_outstanding: int, timeout_s: float = 600.0) -> None:
    """Backpressure: wait until the trusted side has consumed earlier output files."""
    deadline = time.monotonic() + timeout_s
    while len([p for p in out_dir.iterdir() if p.suffix == ".bin"]) >= max_outstanding:
        if time.monotonic() > deadline:
            raise TimeoutError("the trusted side stopped reading outputs")
        time.sleep(0.002)


STAGE_CHUNK = 64 << 20  # bytes per page-locked staging buffer (two of them)
_stage: list[torch.Tensor] = []


def raw_bytes(out: torch.Tensor) -> torch.Tensor:
    """The output's bytes as one flat uint8 tensor (on its device), as the trusted side
    reads them back."""
    return out.detach().contiguous().reshape(-1).view(torch.uint8)


def write_raw(out: torch.Tensor, path: Path) -> None:
    """The output's bytes into `path` (written under another name, then renamed, so the
    trusted side never sees a partial file). A GPU output goes through two page-locked
    64 MB buffers, one copied from the device while the other is written: a whole-output
    `.cpu()` into pageable memory cost ~0.1 s per 512 MB output on the H200."""
    flat = raw_bytes(out)
    tmp = path.with_suffix(".part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        if flat.device.type != "cuda":
            _write_all(fd, memoryview(flat.numpy()))
        elif flat.numel():
            _write_from_gpu(fd, flat)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _write_from_gpu(fd: int, flat: torch.Tensor) -> None:
    if not _stage:
        _stage.extend(_host_buffer() for _ in "ab")
    n = flat.numel()
    starts = list(range(0, n, STAGE_CHUNK))
    events: list = [None, None]

    def copy(k: int) -> None:
        a = starts[k]
        b = min(a + STAGE_CHUNK, n)
        _stage[k % 2][: b - a].copy_(flat[a:b], non_blocking=True)
        events[k % 2] = torch.cuda.Event()
        events[k % 2].record()

    with torch.cuda.device(flat.device):
        copy(0)
        for k, a in enumerate(starts):
            events[k % 2].synchronize()
            if k + 1 < len(starts):
                copy(k + 1)  # into the other buffer, while this one is written
            size = min(STAGE_CHUNK, n - a)
            _write_all(fd, memoryview(_stage[k % 2].numpy())[:size])
        for ev in events:
            if ev is not None:
                ev.synchronize()


def _host_buffer() -> torch.Tensor:
    try:
        return torch.empty(STAGE_CHUNK, dtype=torch.uint8, pin_memory=True)
    except RuntimeError:  # no page-locked memory to be had: slower, same bytes
        return torch.empty(STAGE_CHUNK, dtype=torch.uint8)


def _write_all(fd: int, view: memoryview) -> None:
    while len(view):
        view = view[os.write(fd, view) :]


def sticky_cuda_error(e: BaseException) -> bool:
    text = str(e)
    return isinstance(e, torch.AcceleratorError | RuntimeError) and any(
        s in text
        for s in (
            "illegal memory access",
            "unspecified launch failure",
            "device-side assert",
            "misaligned address",
        )
    )


def environment(device: str) -> dict:
    env = {
        "device": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "interpreter": os.environ.get("TRITON_INTERPRET") == "1",
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device == "cuda" and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(
            device_name=p.name,
            compute_capability=f"{p.major}.{p.minor}",
            cuda=torch.version.cuda,
            sm_count=p.multi_processor_count,
        )
    else:
        env.update(
            device_name=platform.processor() or platform.machine(),
            compute_capability=None,
            cuda=None,
        )
    env["argv0"] = sys.executable
    return env


def compile_facts(modules: dict, device: str) -> list[dict]:
    """Registers, spills and shared memory of every compiled Triton kernel (GPU only)."""
    facts: list[dict] = []
    if device != "cuda":
        return facts
    for impl, module in modules.items():
        for attr, obj in list(vars(module).items()):
            kernel = obj
            while hasattr(kernel, "fn") and not hasattr(kernel, "device_caches"):
                kernel = kernel.fn
            caches = getattr(kernel, "device_caches", None)
            if not caches:
                continue
            for entry in caches.values():
                for compiled in list(entry[0].values()):
                    md = getattr(compiled, "metadata", None)
                    facts.append(
                        {
                            "impl": impl,
                            "name": attr,
                            "n_regs": getattr(compiled, "n_regs", None),
                            "n_spills": getattr(compiled, "n_spills", None),
                            "shared_bytes": getattr(md, "shared", None),
                            "num_warps": getattr(md, "num_warps", None),
                            **code_facts(compiled),
                        }
                    )
    return facts


# Cheap code-level facts from a compiled Triton kernel's own IR (asm["ttgir"], asm["ptx"]):
# counted with plain substring counts, no compiler call. Advisory: the trusted side shows
# them as the worker's report, never uses them to judge.
_TTGIR_OPS = {"convert_layouts": "ttg.convert_layout", "shared_allocs": "ttg.local_alloc"}
_PTX_MIX = {
    "global loads": "ld.global",
    "global stores": "st.global",
    "shared loads": "ld.shared",
    "shared stores": "st.shared",
    "shuffles": "shfl.sync",
    "barriers": "bar.sync",
    "fma": "fma.rn",
    "ex2": "ex2.approx",
    "int mul": "mul.lo",
}


def code_facts(compiled) -> dict:
    """The specialization a compiled kernel was built for (pointer dtypes and constexpr
    values: what tells its rows apart) and counts from its IR: layout conversions and
    shared-memory allocations in TTGIR, an instruction mix from PTX."""
    out: dict = {}
    src = getattr(compiled, "src", None)
    try:
        sig = getattr(src, "signature", None) or {}
        ptrs = sorted({str(t)[1:] for t in sig.values() if str(t).startswith("*")})
        names = list(sig)
        consts = []
        for key, value in (getattr(src, "constants", None) or {}).items():
            idx = key[0] if isinstance(key, tuple) and key else key
            if isinstance(idx, int) and idx < len(names) and isinstance(value, int | float | bool):
                consts.append(f"{names[idx]}={value}")
        parts = ([f"pointers {'/'.join(ptrs)}"] if ptrs else []) + consts[:12]
        if parts:
            out["specialization"] = ", ".join(parts)[:200]
    except Exception:  # noqa: BLE001 - a description only
        pass
    asm = getattr(compiled, "asm", None) or {}
    try:
        ttgir = asm.get("ttgir") if hasattr(asm, "get") else None
        if isinstance(ttgir, str):
            for field, op in _TTGIR_OPS.items():
                out[field] = ttgir.count(op)
        ptx = asm.get("ptx") if hasattr(asm, "get") else None
        if isinstance(ptx, str):
            mix = {k: ptx.count(v) for k, v in _PTX_MIX.items()}
            out["ptx_mix"] = {k: v for k, v in mix.items() if v}
    except Exception:  # noqa: BLE001 - a description only
        pass
    return out


def _compiler_classes() -> tuple[type, ...]:
    """The exceptions a kernel compiler raises (Triton's front end and ptxas), where the
    candidate has loaded Triton at all (a CompilationError needs it: nothing is imported
    here for a candidate that never did)."""
    errors = sys.modules.get("triton.compiler.errors")
    runtime = sys.modules.get("triton.runtime.errors")
    found = [getattr(errors, "CompilationError", None), getattr(runtime, "PTXASError", None)]
    return tuple(c for c in found if isinstance(c, type) and issubclass(c, BaseException))


# torch.utils.cpp_extension's build step: the frame a failed C++ build raises in
_BUILD_FRAMES = {("cpp_extension.py", "_run_ninja_build")}


def compiler_raised(e: BaseException) -> bool:
    """Whether a compiler itself raised `e` or the exception it came from: by the class
    (Triton's CompilationError family, PTXASError, Python's SyntaxError) or by the frame it
    was raised in (a C++ extension's failed build) — never by its text, which a runtime
    error can make look like anything (issue 45, class 7)."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, (SyntaxError, *_compiler_classes())):
            return True
        tb = cur.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            code = tb.tb_frame.f_code
            if (Path(code.co_filename).name, code.co_name) in _BUILD_FRAMES:
                return True
        cur = cur.__cause__ or cur.__context__
    return False


ERROR_CHARS = 8000  # of a traceback sent to the trusted side (its messages take 20,000)


def error_tail(e: BaseException) -> str:
    """A traceback for the trusted side: its last ERROR_CHARS characters, led by the
    exception's own first line when that was cut off — a failed C++ build's message is
    ninja's whole log, whose compiler errors sit in its middle and whose first line names
    the extension (trusted/text.compiler_lines reads both)."""
    import traceback

    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    if len(text) <= ERROR_CHARS:
        return text
    first = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400]
    tail = text[-(ERROR_CHARS - len(first) - 1) :]
    return tail if first in tail else f"{first}\n{tail}"
