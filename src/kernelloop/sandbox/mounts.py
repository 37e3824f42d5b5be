"""What the sandbox's filesystem holds: an allow-list of read-only binds, never `/`.

The new root is an empty tmpfs. Into it go, read-only: /usr (and /bin, /lib, /lib64,
/sbin as the host has them: symlinks or directories), the few files of /etc the dynamic
loader and the compilers need, the Python installation and the directories its import
path draws on, the caller's `ro_paths`, and with a GPU the CUDA toolkit and driver paths
and the assigned GPU's device nodes. Read-write: only the caller's `rw_paths`. Private
and size-capped: /tmp, /dev/shm and $HOME (tmpfs, gone with the sandbox). A fresh /proc
shows only the sandbox's own processes; /dev holds the minimal set bwrap creates.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelloop.errors import SandboxError

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # src/ (editable) or site-packages/

# /etc: the loader's cache and config, `alternatives` (cc -> gcc for Triton's launcher
# build), the time zone, glibc's locale aliases, and Python's Debian config (python3*).
# Not passwd/group: a synthetic pair is bound instead (process.py).
# locale.alias matters for timing: without it glibc's locale setup at Python's start
# allocates differently, and on the CPU the worker's malloc then trimmed and regrew its
# heap on every 1 MB tensor op (a 512x512 RMSNorm measured ~2x slower at p20).
ETC_KEEP = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "timezone",
    "locale.alias",
)
TOP_LINKS = ("bin", "lib", "lib64", "lib32", "libx32", "sbin")
# /sys with a GPU: topology the CUDA driver and NVML read. Not kernel/, firmware/, fs/.
SYS_GPU = ("devices", "bus", "dev", "class", "module")
SYS_CPU = ("devices/system/cpu", "devices/system/node")
# Where the NVIDIA driver lists its GPUs, and where their nodes live (tests point these elsewhere).
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")
DEV = Path("/dev")


@dataclass(frozen=True)
class Mount:
    kind: str  # ro | rw | dev | tmpfs | symlink | hide-file
    dest: Path
    src: Path | None = None
    size: int | None = None

    def argv(self) -> list[str]:
        d = str(self.dest)
        if self.kind == "ro":
            return ["--ro-bind", str(self.src), d]
        if self.kind == "rw":
            return ["--bind", str(self.src), d]
        if self.kind == "dev":
            return ["--dev-bind", str(self.src), d]
        if self.kind == "tmpfs":
            return (["--size", str(self.size)] if self.size else []) + ["--tmpfs", d]
        if self.kind == "symlink":
            return ["--symlink", str(self.src), d]
        if self.kind == "hide-file":
            return ["--ro-bind", "/dev/null", d]
        raise ValueError(self.kind)


def _real(p: Path | str) -> Path:
    return Path(os.path.realpath(p))


def python_paths() -> set[Path]:
    """The Python installation and every directory its import path draws on."""
    paths = {
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.exec_prefix),
        Path(sys.base_exec_prefix),
        PACKAGE_ROOT,
        Path(sys.executable).parent,
    }
    site_dirs = [Path(d) for d in site.getsitepackages()]
    paths.update(site_dirs)
    for d in site_dirs:  # targets of .pth path lines (editable installs)
        for pth in sorted(d.glob("*.pth")) if d.is_dir() else []:
            for line in pth.read_text(errors="replace").splitlines():
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    target = (d / line) if not os.path.isabs(line) else Path(line)
                    if target.is_dir():
                        paths.add(target)
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry) and os.path.isdir(entry):
            paths.add(Path(entry))
    return {p for p in paths if p.exists()}


def libcuda_dirs() -> set[Path]:
    """Directories holding libcuda as the dynamic loader lists it."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {_real(m).parent for m in re.findall(r"libcuda\.so[.\d]*\s.*=>\s*(\S+)", out)}


def gpu_paths() -> set[Path]:
    """CUDA toolkit and driver paths outside /usr (those under it come with /usr)."""
    paths: set[Path] = set()
    for var in ("CUDA_HOME", "CUDA_PATH", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH"):
        if os.environ.get(var):
            paths.add(Path(os.environ[var]))
    paths.update(Path("/usr/local").glob("cuda*"))
    paths.update(p for p in (Path("/usr/local/nvidia"), Path("/opt/nvidia")) if p.exists())
    paths.update(libcuda_dirs())
    return {p for p in paths if p.exists()}


def program_path(argv0: str, env_path: str) -> Path | None:
    """The directory of the program the sandbox runs (e.g. Nsight Compute's install dir)."""
    found = argv0 if os.path.isabs(argv0) else shutil.which(argv0, path=env_path)
    return _real(found).parent if found else None


def gpu_device(index: int) -> tuple[Path, str]:
    """(the device node of the GPU with nvidia-smi index `index`, its CUDA_VISIBLE_DEVICES value).

    The driver lists GPUs under /proc/driver/nvidia/gpus/<PCI bus id>; nvidia-smi's index is
    their PCI order; each names its /dev/nvidiaN minor and its UUID (which CUDA accepts)."""
    gpus = sorted(DRIVER_GPUS.iterdir()) if DRIVER_GPUS.is_dir() else []
    if gpus:
        if not 0 <= index < len(gpus):
            raise SandboxError(
                f"GPU index {index} does not exist here ({len(gpus)} GPU(s)); pass an index below "
                f"{len(gpus)}."
            )
        info = (gpus[index] / "information").read_text(errors="replace")
        minor = re.search(r"Device Minor:\s*(\d+)", info)
        uuid = re.search(r"GPU UUID:\s*(\S+)", info)
        node = DEV / f"nvidia{minor.group(1) if minor else index}"
        visible = (
            uuid.group(1) if uuid and uuid.group(1).startswith(("GPU-", "MIG-")) else str(index)
        )
    else:
        node, visible = DEV / f"nvidia{index}", str(index)
    if not node.exists():
        raise SandboxError(
            f"the device node {node} for GPU {index} does not exist; check the driver (nvidia-smi) "
            f"or pass the index of a GPU this machine has."
        )
    return node, visible


def gpu_nodes(index: int) -> tuple[list[Path], str]:
    """The assigned GPU's node plus the shared control nodes; never another /dev/nvidiaN."""
    node, visible = gpu_device(index)
    shared = [DEV / n for n in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")]
    return [node, *(p for p in shared if p.exists())], visible


def _covered(p: Path, by: list[Path]) -> bool:
    return any(p == b or p.is_relative_to(b) for b in by)


def plan(
    *,
    ro: set[Path],
    rw: list[Path],
    hidden: list[Path],
    gpu_index: int | None,
    scratch: dict[Path, int],
) -> list[Mount]:
    """Every mount, parents before children, so nothing later hides an earlier one."""
    mounts: list[Mount] = []
    for name in TOP_LINKS:
        p = Path("/") / name
        if p.is_symlink():
            mounts.append(Mount("symlink", p, Path(os.readlink(p))))
        elif p.is_dir():
            mounts.append(Mount("ro", p, p))
    mounts.append(Mount("ro", Path("/usr"), Path("/usr")))
    for name in ETC_KEEP + tuple(q.name for q in Path("/etc").glob("python3*")):
        p = Path("/etc") / name
        if p.exists():
            mounts.append(Mount("ro", p, p))
    sys_keep = SYS_GPU if gpu_index is not None else SYS_CPU
    mounts += [
        Mount("ro", Path("/sys") / s, Path("/sys") / s)
        for s in sys_keep
        if (Path("/sys") / s).exists()
    ]
    for dest, size in scratch.items():
        mounts.append(Mount("tmpfs", dest, size=size))
    # Read-only binds at their real path (plus the symlink that led there), skipping any
    # already inside another bind.
    base = [Path("/usr"), *(m.dest for m in mounts if m.kind == "ro")]
    real_ro = sorted({_real(p) for p in ro if p.exists()}, key=lambda p: len(p.parts))
    taken: list[Path] = list(base)
    for p in real_ro:
        if not _covered(p, taken):
            mounts.append(Mount("ro", p, p))
            taken.append(p)
    for p in sorted(ro):
        if p.is_absolute() and p.exists() and p.is_symlink() and not _covered(p, taken):
            mounts.append(Mount("symlink", p, _real(p)))
    for p in rw:
        rp = _real(p)
        mounts.append(Mount("rw", rp, rp))
    visible = [m.dest for m in mounts if m.kind in ("ro", "rw")]
    for h in hidden:
        rh = _real(h)
        if rh.exists() and _covered(rh, visible):
            mounts.append(Mount("tmpfs", rh) if rh.is_dir() else Mount("hide-file", rh))
    if gpu_index is not None:
        nodes, _ = gpu_nodes(gpu_index)
        mounts += [Mount("dev", Path("/dev") / n.name, n) for n in nodes]
    order = {"symlink": 0, "tmpfs": 1, "ro": 2, "dev": 2, "rw": 3, "hide-file": 4}
    # Stable: depth first, then tmpfs before binds at one depth, rw after ro, hiding last.
    return sorted(mounts, key=lambda m: (len(m.dest.parts), order[m.kind]))


def bound_dirs(mounts: list[Mount]) -> list[Path]:
    """The host directories the sandbox sees (under a bind); the tmpfs dirs start empty."""
    return [m.dest for m in mounts if m.kind in ("ro", "rw")]
