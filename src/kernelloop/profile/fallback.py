"""What can be learned without hardware counters: Triton compile facts and kernel timings.

Compile facts need no GPU: Triton compiles a `@triton.jit` function for an sm_90 target on
any machine (the wheel ships ptxas and cuobjdump), and the cubin's resource usage gives
registers, local (spill) memory and shared memory. Measured on this project's CPU box with
triton 3.6: compiling the flagship's dropout kernel took 1.3 s and cuobjdump reported
`REG:40 STACK:0 SHARED:0 LOCAL:0`.

`triton_compile_facts` imports the kernel's module: candidate code is untrusted, so call it
inside the sandboxed worker, or run `python -m kernelloop.profile.fallback SOURCE KERNEL
--signature JSON` there and read the JSON it prints (`compile_facts_command` builds that argv).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelloop.errors import KernelloopError


class CompileFact(BaseModel):
    name: str
    arch: str
    n_regs: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    stack_bytes: int | None = Field(
        default=None, description="per-thread stack frame; spills live here"
    )
    shared_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    launches: int | None = Field(
        default=None, description="launches per call, when recorded from a call"
    )
    constexprs: dict[str, int | float | bool] = Field(default_factory=dict)
    source: str = "triton-compile"

    def occupancy(self) -> Occupancy | None:
        return occupancy(self.n_regs, self.num_warps, self.shared_bytes, self.arch)


class Occupancy(BaseModel):
    theoretical_pct: float
    blocks_per_sm: int
    limiter: str


# Per-SM limits of compute capability 9.0 (H100/H200), from the CUDA occupancy rules:
# registers are allocated per warp in units of 256, and every block also holds the 1 KB of
# shared memory the driver reserves (ncu on the H200: "Driver Shared Memory Per Block 1,024").
_SM90 = {
    "regs": 65536,
    "reg_unit": 256,
    "warps": 64,
    "blocks": 32,
    "smem": 233472,
    "smem_reserved": 1024,
}


def occupancy(
    n_regs: int | None, num_warps: int | None, shared_bytes: int | None, arch: str = "sm_90"
) -> Occupancy | None:
    """Theoretical occupancy from compile facts. Checked against Nsight Compute on the H200:
    196 registers × 8 warps → 12.5% (registers); 34 × 4 → 75%; 32 × 4 → 100%."""
    if arch != "sm_90" or not n_regs or not num_warps:
        return None
    lim = _SM90
    per_warp = -(-n_regs * 32 // lim["reg_unit"]) * lim["reg_unit"]
    limits = {
        "registers": (lim["regs"] // per_warp) // num_warps,
        "warps": lim["warps"] // num_warps,
        "blocks per SM": lim["blocks"],
        "shared memory": lim["smem"] // ((shared_bytes or 0) + lim["smem_reserved"]),
    }
    blocks = min(limits.values())
    limiter = ", ".join(k for k, v in limits.items() if v == blocks)
    return Occupancy(
        theoretical_pct=100.0 * blocks * num_warps / lim["warps"],
        blocks_per_sm=blocks,
        limiter=limiter,
    )


class KernelTiming(BaseModel):
    name: str
    launches: int
    total_us: float
    source: str = "torch.profiler"


def _nvidia_bin(tool: str) -> Path:
    import triton

    p = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / tool
    if not p.is_file():
        raise KernelloopError(
            f"{tool} not found at {p}; reinstall triton (the CUDA backend ships it)."
        )
    return p


def _resource_usage(cubin: bytes, kernel: str) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.cubin"
        path.write_bytes(cubin)
        out = subprocess.run(
            [str(_nvidia_bin("cuobjdump")), "--dump-resource-usage", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    # "Function NAME:\n  REG:40 STACK:0 SHARED:0 LOCAL:0 ..."
    block = re.search(rf"Function {re.escape(kernel)}:\s*\n(.*)", out)
    text = block.group(1) if block else out
    return {k.lower(): int(v) for k, v in re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text)}


def _spills(ptx: str, arch: int) -> tuple[int | None, int | None]:
    """ptxas -v on the kernel's PTX: 'N bytes spill stores, M bytes spill loads'."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        r = subprocess.run(
            [
                str(_nvidia_bin("ptxas")),
                f"-arch=sm_{arch}a" if arch >= 90 else f"-arch=sm_{arch}",
                "-v",
                str(src),
                "-o",
                str(Path(d) / "k.o"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stdout + r.stderr)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def triton_compile_facts(
    source_path: str | Path,
    kernel_name: str,
    signature: dict[str, str],
    constexprs: dict[str, Any] | None = None,
    *,
    num_warps: int = 4,
    num_stages: int = 3,
    maxnreg: int | None = None,
    arch: int = 90,
) -> dict[str, Any]:
    """Registers, spills and shared memory of one @triton.jit kernel compiled for sm_`arch`.

    `signature` maps every parameter to a Triton type ('*fp32', '*bf16', 'i32', 'fp32', …)
    or 'constexpr'; `constexprs` gives the constexpr values. Works without a GPU.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    path = Path(source_path)
    spec = importlib.util.spec_from_file_location(f"_kl_compile_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise KernelloopError(f"cannot import {path}; pass the path of a Python source file.")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, kernel_name, None)
    if fn is None or not hasattr(fn, "params"):
        raise KernelloopError(
            f"{path} has no @triton.jit function {kernel_name!r}; pass the kernel's name."
        )
    constexprs = dict(constexprs or {})
    missing = [p.name for p in fn.params if p.name not in signature]
    if missing:
        raise KernelloopError(
            f"signature lacks {missing}; give a type (e.g. '*fp32', 'i32') or 'constexpr' for each."
        )
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    compiled = triton.compile(
        src,
        target=GPUTarget("cuda", arch, 32),
        options={"num_warps": num_warps, "num_stages": num_stages, "maxnreg": maxnreg},
    )
    usage = _resource_usage(compiled.asm["cubin"], compiled.metadata.name)
    stores, loads = _spills(compiled.asm["ptx"], arch)
    fact = CompileFact(
        name=kernel_name,
        arch=f"sm_{arch}",
        n_regs=usage.get("reg"),
        spill_store_bytes=stores,
        spill_load_bytes=loads,
        stack_bytes=usage.get("stack"),
        # Triton allocates shared memory dynamically; the static part is usually 0.
        shared_bytes=int(compiled.metadata.shared) + usage.get("shared", 0),
        num_warps=num_warps,
        num_stages=num_stages,
    )
    return fact.model_dump()


def compile_facts_command(
    source_path: str | Path,
    kernel_name: str,
    signature: dict[str, str],
    constexprs: dict[str, Any] | None = None,
    *,
    num_warps: int = 4,
    num_stages: int = 3,
    python: str = sys.executable,
) -> list[str]:
    """argv that prints triton_compile_facts(...) as JSON (run it in the sandbox)."""
    return [
        python,
        "-m",
        "kernelloop.profile.fallback",
        str(source_path),
        kernel_name,
        "--signature",
        json.dumps(signature),
        "--constexprs",
        json.dumps(constexprs or {}),
        "--num-warps",
        str(num_warps),
        "--num-stages",
        str(num_stages),
    ]


def torch_profiler_timings(fn, *args, warmup: int = 1, **kwargs) -> list[KernelTiming]:
    """Kernel names, launch counts and GPU times of one call of `fn`, via torch.profiler
    (GPU only)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn(*args, **kwargs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args, **kwargs)
        torch.cuda.synchronize()
    out: dict[str, KernelTiming] = {}
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        t = out.setdefault(ev.name, KernelTiming(name=ev.name, launches=0, total_us=0.0))
        t.launches += 1
        t.total_us += ev.device_time
    return list(out.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelloop.profile.fallback")
    ap.add_argument("source")
    ap.add_argument("kernel")
    ap.add_argument(
        "--signature", required=True, help="JSON: parameter -> Triton type or 'constexpr'"
    )
    ap.add_argument("--constexprs", default="{}", help="JSON: constexpr parameter -> value")
    ap.add_argument("--num-warps", type=int, default=4)
    ap.add_argument("--num-stages", type=int, default=3)
    ap.add_argument("--maxnreg", type=int, default=None)
    a = ap.parse_args(argv)
    facts = triton_compile_facts(
        a.source,
        a.kernel,
        json.loads(a.signature),
        json.loads(a.constexprs),
        num_warps=a.num_warps,
        num_stages=a.num_stages,
        maxnreg=a.maxnreg,
    )
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
