"""The environment trusted task code runs in: an allow-list, never the model keys.

Task code — a task's reference and input generator, an imported KernelBench problem file
(the importer runs it to probe its sizes, then every judge runs it as the reference), an
`[e2e]` model — runs unsandboxed in the `kernelloop` process. Issue #33 finding 6: a
hostile problem file imported by `kernelloop import kernelbench` wrote the launcher's
`OPENAI_API_KEY` to disk. So the command line never runs with the keys: `confine()`, the
first thing `kernelloop` does, re-executes the process with `trusted_env()` — the same
interpreter and arguments, an allow-listed environment. Re-executing, not deleting from
`os.environ`: a deleted variable is still in `/proc/self/environ` (the kernel keeps the
environment the process was started with) and in any SDK client built from it, both
readable by task code in the same process. Commands that talk to a model (`run`,
`suite`) first start a key holder (`kernelloop.agents.llm.keyholder`): a child that keeps
the full environment, builds the SDK clients and answers `complete()` over a socket
whose end the re-executed process inherits; it never imports task code.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence

from kernelloop.sandbox.config import ENV_ALLOW, _secret_name

# Besides the sandbox's ENV_ALLOW: what the trusted process itself needs (its home and
# caches, the terminal, git's identity, the GPU stack's and the executors' settings).
TRUSTED_NAMES = frozenset(
    {
        *ENV_ALLOW,
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TMPDIR",
        "TZ",
        "LANGUAGE",
        "COLORTERM",
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
        "VIRTUAL_ENV",
        "CUDA_VISIBLE_DEVICES",
        "CC",
        "CXX",
        "CUDACXX",
        "CPATH",  # compilers' search paths: torch's C++ extension builds (load_inline)
        "LIBRARY_PATH",
        "C_INCLUDE_PATH",
        "CPLUS_INCLUDE_PATH",
        "CONDA_PREFIX",
        "MAX_JOBS",
        "CI",
        "OPENAI_BASE_URL",  # where a model is served: not a secret, and shown in errors
        "ANTHROPIC_BASE_URL",
    }
)
TRUSTED_PREFIXES = (
    "LC_",
    "XDG_",
    "PYTHON",
    "CUDA_",
    "NVIDIA_",
    "TRITON_",
    "TORCH",
    "PYTORCH_",
    "KERNELLOOP_",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "NCCL_",
    "NVCC_",
    "RAY_",
    "GIT_AUTHOR_",
    "GIT_COMMITTER_",
)
# Credentials whose names do not end in _KEY/_TOKEN/_SECRET/_PASSWORD: never kept, even
# under an allowed prefix.
_CREDENTIAL_PARTS = ("CREDENTIAL", "PASSWD", "COOKIE")
KEYHOLDER_FD = "KERNELLOOP_KEYHOLDER_FD"  # the inherited socket to the key holder
KEYHOLDER_URLS = "KERNELLOOP_KEYHOLDER_URLS"
MODEL_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
# Commands that may build a model agent: only these get a key holder.
MODEL_COMMANDS = ("run", "suite")
_URL_OPTIONS = ("--base-url", "--screen-base-url", "--final-base-url")


def secret_name(name: str) -> bool:
    """A name that may hold a secret or a way out (a proxy): never passed to task code."""
    up = name.upper()
    return _secret_name(name) or any(p in up for p in _CREDENTIAL_PARTS)


def trusted_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed part of `environ`: what trusted task code may see."""
    return {
        k: v
        for k, v in environ.items()
        if (k in TRUSTED_NAMES or k.startswith(TRUSTED_PREFIXES)) and not secret_name(k)
    }


def _command(argv: Sequence[str]) -> str | None:
    """The sub-command's name: the first argument that is not an option."""
    return next((a for a in argv[1:] if not a.startswith("-")), None)


def _urls(argv: Sequence[str]) -> list[str]:
    """The model URLs named on the command line: the only ones the key holder will send a
    key to besides its environment's (task code could otherwise ask it to send the key to
    a server of its own)."""
    found = []
    for i, a in enumerate(argv):
        name, eq, value = a.partition("=")
        if name in _URL_OPTIONS:
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if value:
                found.append(value)
    return found


def _start_keyholder(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    """Start the key holder with the full environment; the inheritable fd of our end."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "kernelloop.agents.llm.keyholder", str(theirs.fileno())],
        env={**environ, KEYHOLDER_URLS: "\n".join(_urls(argv))},
        pass_fds=(theirs.fileno(),),
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C reaches the loop, which ends it by closing ours
    )
    theirs.close()
    fd = os.dup(ours.fileno())  # a plain fd that survives exec
    ours.close()
    os.set_inheritable(fd, True)
    return fd


def confine(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Re-execute this process with `trusted_env` when its environment holds anything
    else; a no-op once it does not (so the re-executed process goes on)."""
    argv = list(sys.argv if argv is None else argv)
    environ = os.environ if environ is None else environ
    clean = trusted_env(environ)
    if clean == dict(environ):
        return
    if _command(argv) in MODEL_COMMANDS and any(environ.get(k) for k in MODEL_KEYS):
        clean[KEYHOLDER_FD] = str(_start_keyholder(argv, environ))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], clean)  # noqa: S606
