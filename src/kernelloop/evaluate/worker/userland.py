"""What an implementation sees of the process that judges it: as little as a user's does.

A kernel could behave only while judged if anything it can read told the judge apart from
real use (issue 45, class 1). So an implementation is imported the way a user's model
imports it — under its file's own stem (`import fused_naive` gives `__name__ ==
"fused_naive"`), with a real `__spec__` (a `SourceFileLoader`, `origin` = its file) — and
while its code runs no `sys.modules` key names the harness: every module whose name
contains "kernelloop" (the harness itself, the task's input generator) is taken out of
`sys.modules` before the implementation is imported and again before each of its calls
(`Hider.hide`). The modules stay alive (the harness holds them); a harness function that
imports one of them lazily gets the very same object back (`Hider` is also a finder on
`sys.meta_path` for exactly those names), never a second copy. What a candidate can still
observe is listed in docs/security.md ("What a judged candidate can observe").
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

_TELL = "kernelloop"


class Hider(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self) -> None:
        self.hidden: dict[str, object] = {}
        self._seen = -1  # len(sys.modules) at the last hide: nothing new, nothing to do

    def hide(self) -> None:
        """Take every module named after the harness out of `sys.modules` (cheap when no
        module was added since the last call)."""
        modules = sys.modules
        if len(modules) == self._seen:
            return
        for name in [k for k in list(modules) if _TELL in k.lower()]:
            self.hidden[name] = modules.pop(name)
        self._seen = len(modules)

    # ---- a lazy `import kernelloop...` inside the harness gets the hidden module back ----
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.hidden:
            return None
        module = self.hidden[fullname]
        old = getattr(module, "__spec__", None)
        spec = importlib.machinery.ModuleSpec(
            fullname,
            self,
            origin=getattr(old, "origin", None),
            is_package=hasattr(module, "__path__"),
        )
        return spec

    def create_module(self, spec):
        return self.hidden[spec.name]

    def exec_module(self, module) -> None:
        return None  # already executed: the harness's own copy


HIDER = Hider()


def install() -> None:
    """Before any implementation's code runs: the harness's modules out of sight. On a GPU
    the commitment kernel (imported lazily by the harness) is loaded first."""
    try:
        import torch

        if torch.cuda.is_available():
            from kernelloop.evaluate import commitment

            commitment.digest_kernel()
    except ImportError:  # a CPU-only torch without triton: nothing to load
        pass
    if HIDER not in sys.meta_path:
        sys.meta_path.insert(0, HIDER)
    HIDER.hide()


def import_as_user(path: str):
    """The implementation at `path` imported as `import <its stem>` would import it (the
    trusted side names the file: trusted/launch/naming.py): in `sys.modules` under that
    name, with a source-file spec and loader. Its folder is not put on `sys.path` (a
    module planted beside it is never imported)."""
    install()
    name = Path(path).stem
    if name in sys.modules:  # the trusted side never names one so (naming.ordinary)
        raise ImportError(f"an implementation named {name!r} would replace a loaded module")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    HIDER.hide()
    return module
