"""Start an untrusted worker isolated from the network, the loop's state and its secrets.

Three levels, best first:
- bubblewrap: new namespaces for net/pid/ipc/uts, the filesystem read-only except a
  private tmp, $HOME and the loop's state hidden, only the GPU device nodes passed in.
  When the sandbox's init dies, the kernel kills every process in its pid namespace,
  including children that started a new session.
- `unshare -n`: no network, same environment scrubbing and rlimits.
- a plain process, with a loud warning.
In every mode the whole process group is killed on timeout, and any process still
carrying this evaluation's marker in its environment is hunted down and killed.
"""

from __future__ import annotations

import ctypes
import os
import queue
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kernelloop.errors import SandboxError

# Variables passed to the worker; everything else (API keys, tokens, proxies) is dropped.
ENV_ALLOW = (
    "PATH",
    "PYTHONPATH",
    "LANG",
    "LC_ALL",
    "TERM",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "TRITON_PTXAS_PATH",
    "TRITON_LIBCUDA_PATH",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)
MARKER = "KERNELLOOP_SANDBOX_ID"
# New network and pid namespaces: when the worker (pid 1 there) dies, so does every
# process it started, sessions or not.
UNSHARE_ARGV = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc"]


@dataclass
class SandboxResult:
    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    wall_s: float
    mode: str
    stray_killed: int = 0


@dataclass
class SandboxConfig:
    mode: str = "auto"  # auto | bwrap | unshare | none
    timeout_s: float = 600.0
    gpu: bool = False
    max_file_bytes: int = 8 << 30
    max_open_files: int = 4096
    ro_paths: list[Path] = field(default_factory=list)
    rw_paths: list[Path] = field(default_factory=list)
    hidden_paths: list[Path] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)


def bwrap_path() -> str | None:
    override = os.environ.get("KERNELLOOP_BWRAP")
    if override and Path(override).is_file():
        return override
    return shutil.which("bwrap")


def _probe(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_MODE_CACHE: dict[str, str] = {}


def detect_mode(requested: str = "auto") -> str:
    """The strongest isolation that actually works on this machine (probed once)."""
    if requested == "none":
        return "none"
    if requested in _MODE_CACHE:
        return _MODE_CACHE[requested]
    bw = bwrap_path()
    ok_bwrap = bool(bw) and _probe(
        [bw, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    )
    ok_unshare = bool(shutil.which("unshare")) and _probe([*UNSHARE_ARGV, "true"])
    if requested == "bwrap" and not ok_bwrap:
        raise SandboxError("bubblewrap was requested but does not work here; install it (apt-get install bubblewrap) or use --sandbox auto.")
    if requested == "unshare" and not ok_unshare:
        raise SandboxError("`unshare -n` was requested but does not work here (needs root or user namespaces); use --sandbox auto.")
    mode = requested if requested != "auto" else ("bwrap" if ok_bwrap else "unshare" if ok_unshare else "none")
    _MODE_CACHE[requested] = mode
    return mode


def scrubbed_env(private_home: Path, private_tmp: Path, marker: str, extra: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    env.update(
        HOME=str(private_home),
        TMPDIR=str(private_tmp),
        TRITON_CACHE_DIR=str(private_home / "triton-cache"),
        TORCHINDUCTOR_CACHE_DIR=str(private_home / "inductor-cache"),
        CUDA_CACHE_PATH=str(private_home / "nv-cache"),
        XDG_CACHE_HOME=str(private_home / "cache"),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        PYTHONHASHSEED="0",
        **{MARKER: marker},
    )
    env.update(extra)
    return env


def _bwrap_argv(bw: str, cfg: SandboxConfig, home: Path, tmp: Path) -> list[str]:
    argv = [bw, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    # Hide what may hold secrets or the loop's state: the user's home, /tmp, /dev/shm, /run.
    user_home = Path(os.path.expanduser("~")).resolve()
    hidden = [Path("/tmp"), Path("/dev/shm"), Path("/run")]
    if str(user_home) != "/":
        hidden.append(user_home)
    for h in hidden:
        argv += ["--tmpfs", str(h)]
    # Then bring back, read-only, what the worker needs from under them: the Python
    # installation, the package and the task folder (a CI clone may live in /tmp).
    package_root = Path(__file__).resolve().parents[2]  # src/ (editable) or site-packages/
    keep = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package_root,
            *(p.resolve() for p in cfg.ro_paths)}
    for p in sorted(keep):
        if p.exists() and any(p.is_relative_to(h) for h in hidden):
            argv += ["--ro-bind", str(p), str(p)]
    for p in cfg.hidden_paths:
        if p.exists():
            argv += ["--tmpfs", str(p)] if p.is_dir() else ["--ro-bind", "/dev/null", str(p)]
    for p in [home, tmp, *cfg.rw_paths]:
        argv += ["--bind", str(p), str(p)]
    if cfg.gpu:
        for node in sorted(Path("/dev").glob("nvidia*")):
            argv += ["--dev-bind", str(node), str(node)]
        if Path("/dev/dri").exists():
            argv += ["--dev-bind", "/dev/dri", "/dev/dri"]
    argv += ["--chdir", str(tmp), "--"]
    return argv


# Loaded before any fork: the child only calls through it (no loading between fork and exec).
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _limits(cfg: SandboxConfig):
    parent = os.getpid()

    def apply() -> None:
        # No RLIMIT_AS: CUDA reserves huge virtual ranges and fails under it.
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (cfg.max_file_bytes, cfg.max_file_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (cfg.max_open_files, cfg.max_open_files))
        # Die with the loop: if the process that launched the sandbox is SIGKILLed, the
        # sandbox's first process (bwrap, unshare or the worker itself) is killed too;
        # `unshare --kill-child` and bwrap's --die-with-parent carry that inwards. The
        # parent check covers a loop that died before the prctl took effect.
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)

    return apply


def kill_marked(marker: str) -> int:
    """Kill every process whose environment carries this sandbox's marker (escapees)."""
    needle = f"{MARKER}={marker}".encode()
    killed = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            continue
    return killed


class SandboxProcess:
    """A running sandboxed worker whose stdout is a line channel read as it arrives."""

    def __init__(self, argv: list[str], workdir: Path, cfg: SandboxConfig, stdin: bytes = b"") -> None:
        self.cfg = cfg
        self.mode = detect_mode(cfg.mode)
        home, tmp = workdir / "home", workdir / "tmp"
        home.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(parents=True, exist_ok=True)
        self.marker = os.urandom(8).hex()
        env = scrubbed_env(home, tmp, self.marker, cfg.extra_env)
        if self.mode == "bwrap":
            full = _bwrap_argv(bwrap_path() or "bwrap", cfg, home, tmp) + argv
        elif self.mode == "unshare":
            full = [*UNSHARE_ARGV, "--", *argv]
        else:
            full = list(argv)
        # stderr goes to a file: a daemon that escaped holding the write end must not
        # keep us waiting for an EOF that never comes.
        self.err_path = workdir / "worker.stderr"
        self._err_f = open(self.err_path, "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            full,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err_f,
            env=env,
            cwd=str(tmp),
            start_new_session=True,
            preexec_fn=_limits(cfg),
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.timed_out = False

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self._lines.put(line)
        self._lines.put(None)

    def lines(self) -> Iterator[bytes]:
        """Yield channel lines until the worker exits or the wall-clock limit passes."""
        deadline = self.t0 + self.cfg.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                return
            try:
                line = self._lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self._lines.empty():
                    # Exited; an escaped child may still hold stdout open, so stop here.
                    time.sleep(0.05)
                    if self._lines.empty():
                        return
                continue
            if line is None:
                return
            yield line

    def finish(self) -> SandboxResult:
        if self.proc.poll() is None and not self.timed_out:
            try:
                self.proc.wait(timeout=max(0.1, self.t0 + self.cfg.timeout_s - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.timed_out = True
        # Whatever the worker left behind (its group, a daemon in a new session) dies.
        _killpg(self.proc.pid)
        stray = kill_marked(self.marker)
        self.proc.wait()
        self._err_f.close()
        rest = b""
        while not self._lines.empty():
            item = self._lines.get_nowait()
            rest += item or b""
        return SandboxResult(
            returncode=None if self.timed_out else self.proc.returncode,
            stdout=rest,
            stderr=self.err_path.read_bytes(),
            timed_out=self.timed_out,
            wall_s=time.monotonic() - self.t0,
            mode=self.mode,
            stray_killed=stray,
        )


def run_sandboxed(argv: list[str], workdir: Path, cfg: SandboxConfig, stdin: bytes = b"") -> SandboxResult:
    """Run `argv` isolated to completion (or its timeout); stdout is returned whole."""
    sp = SandboxProcess(argv, workdir, cfg, stdin)
    out = b"".join(sp.lines())
    res = sp.finish()
    res.stdout = out + res.stdout
    return res


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
