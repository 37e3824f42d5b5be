"""Reading what a sandboxed run left in its work dir, and cleaning text the candidate shaped.

The work dir is writable from inside the sandbox, so any name in it may have become a
symlink (to `/etc/shadow`, or to `/proc/self/environ`, which the trusted process would
resolve to its own environment and API keys), a FIFO that blocks a reader forever, or a
file of any size. Files are opened relative to a directory descriptor taken before the
run, with O_NOFOLLOW and O_NONBLOCK; only regular files are read, and only up to a cap.

Kernel names, rule hints and error lines come from the candidate's process (a Triton
kernel's name is the candidate's choice, and ncu's output file is candidate-writable), and
part of them goes back to the agent: control characters are stripped and lengths cut.
"""

from __future__ import annotations

import os
import re
import stat

from kernelloop.errors import KernelloopError

# C0/C1 controls, and the Unicode format characters that reorder or hide text.
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)


class UntrustedFile(KernelloopError):
    """A file in a sandboxed run's work dir that is not a regular file of acceptable size."""


def open_dir(path: str | os.PathLike) -> int:
    """A descriptor of a work dir the trusted side created; take it before the run."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def read_regular(dir_fd: int, name: str, max_bytes: int) -> bytes:
    """The bytes of `name` directly inside `dir_fd`: never through a symlink, never from a
    FIFO or device, never more than `max_bytes`. Raises UntrustedFile (missing included)."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a plain file name: {name!r}")
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except FileNotFoundError as e:
        raise UntrustedFile(f"{name} was not written") from e
    except OSError as e:  # ELOOP: a symlink; EACCES, ENXIO (a socket) …
        raise UntrustedFile(
            f"{name} is not a regular file the run wrote ({os.strerror(e.errno or 0)})"
        ) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedFile(f"{name} is not a regular file")
        if st.st_size > max_bytes:
            raise UntrustedFile(f"{name} has {st.st_size} bytes, more than the {max_bytes} read")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:  # it grew while read: a live writer survived the run
            raise UntrustedFile(f"{name} grew past {max_bytes} bytes while it was read")
        return data
    finally:
        os.close(fd)


def write_new(dir_fd: int, name: str, data: bytes) -> None:
    """Create `name` inside `dir_fd` (never through something already there)."""
    try:
        os.unlink(name, dir_fd=dir_fd)  # a planted symlink is removed, not followed
    except FileNotFoundError:
        pass
    fd = os.open(
        name,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o644,
        dir_fd=dir_fd,
    )
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def clean(text: object, limit: int) -> str:
    """One line of candidate-shaped text fit to show: controls removed, whitespace
    collapsed, at most `limit` characters."""
    s = " ".join(_CONTROL.sub(" ", str(text)).split())
    return s if len(s) <= limit else s[: max(0, limit - 1)] + "…"
