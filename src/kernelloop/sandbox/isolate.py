"""Compatibility imports: the sandbox was one module; it is now split by role.

config.py (what a caller asks and gets), bwrap.py (the mode and its flags), seccomp.py
(the syscall filter), mounts.py (the allow-list of binds), limits.py (cgroups, rlimits),
process.py (a running worker and its bounded streams).
"""

from kernelloop.sandbox.bwrap import bwrap_path, detect_mode
from kernelloop.sandbox.config import ENV_ALLOW, MARKER, SandboxConfig, SandboxResult, scrubbed_env
from kernelloop.sandbox.process import SandboxProcess, kill_marked, run_sandboxed

__all__ = [
    "ENV_ALLOW",
    "MARKER",
    "SandboxConfig",
    "SandboxProcess",
    "SandboxResult",
    "bwrap_path",
    "detect_mode",
    "kill_marked",
    "run_sandboxed",
    "scrubbed_env",
]
