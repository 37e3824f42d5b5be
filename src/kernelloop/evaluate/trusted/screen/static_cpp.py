"""The static screen's rules for C++ and CUDA C++ sources (`language = "cuda"`): the string
constants of a candidate that builds an extension (`load_inline(cpp_sources=…,
cuda_sources=…)`), scanned as text. A policy and a cheap early filter, never a boundary:
native code can do anything its process can, and the sandbox is what holds it (no
privileges, no network, the assigned GPU's nodes only; docs/security.md). What it refuses,
each with why (docs/evaluate.md, "Static screen"):

- process and file access from the host code: `system`, `popen`, `fork`/`exec*`,
  `dlopen`/`dlsym`, `syscall`, `ptrace`, file streams, and the headers that bring them
  (`<unistd.h>`, `<dlfcn.h>`, `<sys/…>`, `<fstream>`, `<filesystem>`, `<thread>`,
  `<pthread.h>`, `<signal.h>`, `<fcntl.h>`) — a kernel needs none of it;
- work outside the timed stream and device state that outlives the call: creating
  streams, graphs, events (a timer of its own), `cudaSetDevice`, `cudaDeviceSetLimit`,
  `cudaDeviceReset`, `cudaProfilerStart/Stop`, NVML;
- PyTorch compute from C++ (`at::matmul`, `torch::softmax`): the task asks for a kernel;
  `at::`/`torch::` names are limited to tensors, allocation, dtypes, devices, the
  current stream and guards (`ATEN_ALLOWED`). Tensor methods that compute (`x.sum()`)
  are not seen here: the op audit sees them at run time. Where the task's model draws
  random numbers (`draws`), torch's seeding and random factories too (`at::randn`,
  `torch::rand_like`…, static_rules.TORCH_RNG, as in Python): a C++ candidate draws what
  the model draws from the call's `draw_seed`; the op audit still lets through only the
  fills with scalar moments (protocol.RNG_FILL_OPS).

Inline PTX (`asm volatile(...)`) is allowed: fast kernels use it.
"""

from __future__ import annotations

import ast
import re

from kernelloop.evaluate.trusted.screen.static_rules import TORCH_RNG

HEADERS_FORBIDDEN = (
    "unistd.h",
    "dlfcn.h",
    "fstream",
    "filesystem",
    "thread",
    "pthread.h",
    "signal.h",
    "fcntl.h",
    "spawn.h",
    "link.h",
)
CALLS_FORBIDDEN = {
    "system": "runs a shell command",
    "popen": "runs a shell command",
    "fork": "starts a process",
    "vfork": "starts a process",
    "execl": "runs a program",
    "execlp": "runs a program",
    "execle": "runs a program",
    "execv": "runs a program",
    "execvp": "runs a program",
    "execve": "runs a program",
    "posix_spawn": "starts a process",
    "dlopen": "loads a library at run time",
    "dlsym": "looks up a symbol at run time",
    "syscall": "makes a raw system call",
    "ptrace": "traces a process",
    "fopen": "opens a file",
    "freopen": "opens a file",
    "ifstream": "opens a file",
    "ofstream": "opens a file",
    "fstream": "opens a file",
    "cudaStreamCreate": "creates a stream: work outside the timed stream",
    "cudaStreamCreateWithFlags": "creates a stream: work outside the timed stream",
    "cudaStreamCreateWithPriority": "creates a stream: work outside the timed stream",
    "getStreamFromPool": "takes a side stream: work outside the timed stream",
    "cudaGraphLaunch": "launches a graph of its own",
    "cudaStreamBeginCapture": "captures a graph of its own",
    "cudaEventCreate": "creates an event: a timer of its own",
    "cudaEventCreateWithFlags": "creates an event: a timer of its own",
    "cudaSetDevice": "switches the device",
    "cudaDeviceSetLimit": "changes device limits that outlive the call",
    "cudaDeviceSetCacheConfig": "changes device state that outlives the call",
    "cudaDeviceReset": "resets the device",
    "cudaProfilerStart": "drives the profiler",
    "cudaProfilerStop": "drives the profiler",
}
# at:: / torch:: names a kernel's host code may use: tensors and their types, allocation,
# dtypes, devices, the current stream, guards, checks. Anything else there is compute.
ATEN_ALLOWED = {
    "Tensor",
    "TensorOptions",
    "TensorAccessor",
    "PackedTensorAccessor32",
    "PackedTensorAccessor64",
    "RestrictPtrTraits",
    "DefaultPtrTraits",
    "IntArrayRef",
    "Scalar",
    "ScalarType",
    "Device",
    "DeviceType",
    "Layout",
    "MemoryFormat",
    "Half",
    "BFloat16",
    "Float8_e4m3fn",
    "Float8_e5m2",
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "full",
    "full_like",
    "dtype",
    "device",
    "kStrided",
    "kCPU",
    "kCUDA",
    "cuda",  # checked further below
    "detail",
    "elementSize",
    "toString",
    "typeMetaToScalarType",
    "optional",
    "nullopt",
    "ArrayRef",
    "irange",
    "string_view",
    "complex",
    "TypeMeta",
}
ATEN_CUDA_ALLOWED = {
    "getCurrentCUDAStream",
    "getDefaultCUDAStream",
    "CUDAGuard",
    "OptionalCUDAGuard",
    "CUDAStreamGuard",
    "getCurrentDeviceProperties",
    "getDeviceProperties",
    "CUDAStream",
}
_INCLUDE = re.compile(r"#\s*include\s*[<\"]([^>\"]+)[>\"]")
_CALL = re.compile(r"(?<![\w.>])(?:std::|::)?([A-Za-z_]\w*)\s*\(")
_ATEN = re.compile(r"\b(at|torch|c10)::((?:\w+::)*)(\w+)")
_DTYPE_CONST = re.compile(r"k[A-Z]\w*")
# A string is C++ when it looks like it: an include, a kernel qualifier, a namespace path.
_LOOKS_CPP = re.compile(r"#\s*include|__global__|__device__|\b(?:at|torch|c10|std)::")


def looks_like_cpp(text: str) -> bool:
    return bool(_LOOKS_CPP.search(text))


def cpp_findings(text: str, draws: bool = False) -> list[tuple[int, str]]:
    """(line offset within `text`, message) for each rule `text` breaks; [] if none.
    `draws`: the task's model draws random numbers (torch's random factories allowed)."""
    out: list[tuple[int, str]] = []

    def at(pos: int) -> int:
        return text.count("\n", 0, pos)

    code = _strip_comments(text)
    for m in _INCLUDE.finditer(code):
        header = m.group(1).strip()
        if header in HEADERS_FORBIDDEN or header.startswith("sys/"):
            out.append(
                (at(m.start()), f"C++ includes <{header}>, which a kernel's host code may not use")
            )
    for m in _CALL.finditer(code):
        name = m.group(1)
        if name in CALLS_FORBIDDEN:
            out.append((at(m.start()), f"C++ calls {name}(), which {CALLS_FORBIDDEN[name]}"))
    for m in _ATEN.finditer(code):
        ns, inner, name = m.group(1), m.group(2), m.group(3)
        path = f"{ns}::{inner}{name}"
        first = (inner.split("::")[0] if inner else name) or name
        if first == "cuda" and inner:
            if name not in ATEN_CUDA_ALLOWED and name not in CALLS_FORBIDDEN:
                out.append(
                    (
                        at(m.start()),
                        f"C++ uses {path}: from {ns}::cuda only the current stream, guards "
                        "and device properties",
                    )
                )
            continue
        if inner.startswith("detail::") or first in ("detail",):
            ok = True
        else:
            ok = first in ATEN_ALLOWED or bool(_DTYPE_CONST.fullmatch(first))
            ok = ok or (draws and not inner and name in TORCH_RNG)
        if not ok:
            out.append(
                (
                    at(m.start()),
                    f"C++ calls {path}, PyTorch compute: the task asks for a kernel (from "
                    "at::/torch:: only tensors, allocation, dtypes, devices, the current "
                    "stream and guards)",
                )
            )
    return out


def _strip_comments(text: str) -> str:
    """`text` with // and /* */ comments blanked (newlines kept, so offsets stay lines)."""

    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, text, flags=re.S)


def cpp_module_findings(tree: ast.Module, draws: bool) -> list[tuple[int, str]]:
    """(line, message) for every C++/CUDA C++ source among a module's string constants."""
    out = []
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and looks_like_cpp(text):
            base = getattr(node, "lineno", 0)
            out += [(base + offset, message) for offset, message in cpp_findings(text, draws)]
    return out
