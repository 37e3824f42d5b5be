"""A candidate file given on the command line, refused in one sentence when it cannot be
one (issue 36: a directory "did not exist"; 50 MB and non-UTF-8 files went through)."""

from __future__ import annotations

from pathlib import Path

from kernelloop.errors import KernelloopError

# Far above any kernel source (the flagship's largest candidate is ~12 KB; KernelBench
# solutions stay under 100 KB), far below what would slow the static screen or the prompt.
MAX_CANDIDATE_BYTES = 1 << 20


def check_candidate_file(path: Path, what: str = "candidate") -> None:
    if not path.exists():
        raise KernelloopError(f"{what} {path} does not exist; pass the path of a source file.")
    if path.is_dir():
        raise KernelloopError(
            f"{what} {path} is a directory; pass one source file (e.g. {path}/kernel.py)."
        )
    if not path.is_file():
        raise KernelloopError(f"{what} {path} is not a regular file; pass a source file.")
    size = path.stat().st_size
    if size > MAX_CANDIDATE_BYTES:
        raise KernelloopError(
            f"{what} {path} is {size / 1e6:.1f} MB, over the {MAX_CANDIDATE_BYTES >> 10} KB "
            "limit for a kernel source; pass the source file itself."
        )
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise KernelloopError(
            f"{what} {path} is not UTF-8 text (byte {e.start}); save it as UTF-8 source."
        ) from None
