"""Run a hostile candidate the way an attacker would: the static screen bypassed.

Every red-team test asserts the same four things (issue 12): the candidate is rejected
with its category; a canary file outside the scratch dir is untouched; the trusted
process is alive (the call returned a record instead of raising); no process the
candidate started is left behind.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = Path(__file__).parent / "candidates"
SMALL = {
    "device": "cpu",
    "shapes": "7x129",
    "dtypes": ["float32"],
    "timing": False,
    "timeout_s": 180,
}


@dataclass
class Canary:
    """A file the trusted side owns, outside every scratch dir, that no candidate may touch."""

    path: Path
    digest: str

    @classmethod
    def plant(cls, folder: Path) -> Canary:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "canary.txt"
        data = secrets.token_bytes(64)
        path.write_bytes(data)
        return cls(path, hashlib.sha256(data).hexdigest())

    def intact(self) -> bool:
        return (
            self.path.is_file()
            and hashlib.sha256(self.path.read_bytes()).hexdigest() == self.digest
        )


def processes_with(token: str) -> list[int]:
    """Pids whose command line or environment carries `token` (a candidate's leftovers)."""
    needle = token.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        for name in ("cmdline", "environ"):
            try:
                if needle in Path(f"/proc/{entry}/{name}").read_bytes():
                    found.append(int(entry))
                    break
            except OSError:
                continue
    return found


def candidate_source(name: str, **subst: str) -> str:
    """A candidate's text with `{{KEY}}` placeholders filled (paths known only at test time).
    `{{THIEF}}` is the shared channel thief (candidates/thief.part) unless given."""
    text = (CANDIDATES / name).read_text()
    subst = {"THIEF": (CANDIDATES / "thief.part").read_text(), **subst}
    for key, value in subst.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def write_candidate(tmp: Path, name: str, **subst: str) -> Path:
    path = tmp / name
    path.write_text(candidate_source(name, **subst))
    return path


def is_root() -> bool:
    return os.geteuid() == 0
