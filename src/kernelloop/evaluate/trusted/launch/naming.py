"""The module name a worker imports an implementation under (issue 45, class 1).

A user's model imports a kernel file under its own stem (`import fused_naive`), so a worker
does the same: the trusted side copies the file into the worker's folder as `<name>.py`
and the worker imports it under that stem (worker/userland.import_as_user). The name is
the proposal's own file stem where that is a name a user could import it under; otherwise
(the stem is not an identifier, names the harness, or would shadow a module the worker
imports: `torch.py`, `math.py`) an ordinary module name drawn per evaluation, never one
derived from "kernelloop".
"""

from __future__ import annotations

import importlib.util
import keyword
import secrets
import sys
from pathlib import Path

# Names people give a kernel file; one is drawn where the proposal's stem cannot be used.
ORDINARY = (
    "kernels",
    "fused_ops",
    "custom_ops",
    "ops",
    "layers",
    "fused_kernels",
    "triton_ops",
    "model_kernels",
)


def ordinary(stem: str) -> bool:
    """Whether `stem` is a name a worker may import an implementation under: an identifier,
    not a keyword, not naming the harness, and shadowing no module (the standard library's
    or an installed one, which the harness or the candidate itself imports)."""
    if not stem.isidentifier() or keyword.iskeyword(stem) or stem.startswith("_"):
        return False
    if "kernelloop" in stem.lower() or stem in sys.stdlib_module_names or stem in sys.modules:
        return False
    try:
        return importlib.util.find_spec(stem) is None
    except (ImportError, ValueError):
        return False


def module_name(path: Path) -> str:
    """The name the implementation at `path` is imported under in a worker."""
    stem = Path(path).stem
    if ordinary(stem):
        return stem
    return secrets.choice([n for n in ORDINARY if ordinary(n)] or ["kernels"])
