from kernelloop.sandbox.isolate import (
    ENV_ALLOW,
    SandboxConfig,
    SandboxProcess,
    SandboxResult,
    detect_mode,
    run_sandboxed,
)

__all__ = ["ENV_ALLOW", "SandboxConfig", "SandboxProcess", "SandboxResult", "detect_mode", "run_sandboxed"]
