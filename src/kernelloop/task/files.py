"""Every entry of a task folder: what the task digest hashes and what an evaluation
snapshots and restores.

Everything counts, `__pycache__` included: Python runs a `.pyc` in place of its source
when one is found next to it, so bytecode is as much the task as the source is (the
loader here never reads one, but other tools might). Two top-level folders are left out:
- `.kernelloop/`, the loop's own state (history database, variants, run files). It
  changes every round and is hidden from the sandbox, so a candidate cannot touch it.
- `.git/`, when the task folder is a repository's root (`Versions.open` creates one
  there): the loop commits every variant into it between evaluations, so hashing it
  would change the digest every round (a resumed run and the gate compare digests).
  The sandbox binds the task folder read-only, `.git` included.
Symbolic links are recorded as links (never followed), other special files by kind:
a link planted to `/dev/zero` cannot make the snapshot read forever.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from kernelloop.task.workspace import WORKSPACE_NAME

EXCLUDED = frozenset({WORKSPACE_NAME, ".git"})  # top-level names only, see above

Entry = tuple[str, bytes]  # ("file", content) | ("link", target) | ("dir", b"") | ("other", b"")


def entries(folder: Path) -> dict[str, Entry]:
    """rel path (posix) -> entry, for everything under `folder` but the excluded names."""
    folder = Path(folder)
    out: dict[str, Entry] = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        if here == folder:
            dirnames[:] = [d for d in dirnames if d not in EXCLUDED]
            filenames = [f for f in filenames if f not in EXCLUDED]
        dirnames.sort()
        for name in sorted([*dirnames, *filenames]):
            path = here / name
            rel = path.relative_to(folder).as_posix()
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.fsencode(os.readlink(path)))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", b"")
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", _read(path))
            else:
                out[rel] = ("other", b"")
    return out


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def digest(folder: Path) -> str:
    """Hash of every entry (name, kind and content) of the task folder."""
    h = hashlib.sha256()
    for rel, (kind, data) in sorted(entries(folder).items()):
        for part in (rel.encode(), kind.encode(), data):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
    return h.hexdigest()[:16]


def restore(folder: Path, snap: dict[str, Entry]) -> None:
    """Make the folder hold exactly `snap` again, never writing through a link: whatever
    was added (a file, a link, a planted `__pycache__`) is removed, whatever was changed
    or replaced is written back. Special files ("other") are removed, not recreated."""
    folder = Path(folder)
    now = entries(folder)
    # Deepest first, so a folder's content goes before the folder.
    for rel in sorted(now, key=lambda r: r.count("/"), reverse=True):
        if now[rel] != snap.get(rel) or now[rel][0] == "other":
            if now[rel][0] == "dir" and snap.get(rel, ("",))[0] == "dir":
                continue
            _remove(folder / rel)
    for rel, (kind, data) in sorted(snap.items(), key=lambda kv: kv[0].count("/")):
        path = folder / rel
        if kind == "dir":
            if not path.is_dir() or path.is_symlink():
                _remove(path)
                path.mkdir()
        elif kind == "link" and not path.is_symlink():
            _remove(path)
            os.symlink(os.fsdecode(data), path)
        elif kind == "file" and now.get(rel) != (kind, data):
            _remove(path)
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
            )
            with os.fdopen(fd, "wb") as f:
                f.write(data)


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)
