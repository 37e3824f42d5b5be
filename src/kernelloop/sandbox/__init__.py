"""Start an untrusted worker with no privileges: see docs/security.md, "The sandbox"."""

from kernelloop.sandbox.bwrap import detect_mode
from kernelloop.sandbox.config import ENV_ALLOW, SandboxConfig, SandboxResult
from kernelloop.sandbox.process import SandboxProcess, run_sandboxed

__all__ = [
    "ENV_ALLOW",
    "SandboxConfig",
    "SandboxProcess",
    "SandboxResult",
    "detect_mode",
    "run_sandboxed",
]
