"""Red team: real hostile Python inside the real sandbox (issue #12).

Every test runs tests/redteam/hostile.py inside `run_sandboxed`/`SandboxProcess` (not
through the evaluator) and checks, from the trusted side, that the attack failed and
left nothing behind. CI runs these as root, the case the issue was found in;
test_sandbox_nonroot.py runs the launcher as an ordinary user.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import platform
import site
import socket
import sys
import time
from pathlib import Path

import pytest

from kernelloop.errors import SandboxError
from kernelloop.sandbox import SandboxConfig, SandboxProcess, detect_mode, run_sandboxed
from kernelloop.sandbox.config import MARKER

HOSTILE = (Path(__file__).parent / "hostile.py").read_bytes()
ROOT = Path(__file__).resolve().parents[2]
EPERM, ENOSYS = errno.EPERM, errno.ENOSYS

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
    reason="hostile.py uses x86_64 Linux syscall numbers",
)


def attack(cfg: SandboxConfig, work: Path, name: str, *args) -> tuple[dict | None, object]:
    res = run_sandboxed([sys.executable, "-", name, *map(str, args)], work, cfg, stdin=HOSTILE)
    msgs = [json.loads(line) for line in res.stdout.splitlines() if line.startswith(b"{")]
    return (msgs[0] if msgs else None), res


@pytest.fixture
def box(tmp_path):
    """A work dir (rw), a task folder (ro, with a canary), a folder never bound (a secret)."""
    work, task, outside = tmp_path / "work", tmp_path / "task", tmp_path / "outside"
    for d in (work, task, outside):
        d.mkdir()
    (task / "reference.py").write_text("CANARY = 'task folder, untouched'\n")
    (outside / "history.db").write_text("loop state the candidate must not see\n")
    cfg = SandboxConfig(
        timeout_s=60, rw_paths=[work], ro_paths=[task], hidden_paths=[task / ".kernelloop"]
    )
    return cfg, work, task, outside


def _marked(marker: str) -> list[int]:
    needle = f"{MARKER}={marker}".encode()
    found = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and needle in (p / "environ").read_bytes().split(b"\0"):
                found.append(int(p.name))
        except OSError:
            continue
    return found


def test_the_worker_runs_as_nobody_with_no_capabilities_under_seccomp(box):
    cfg, work, *_ = box
    got, res = attack(cfg, work, "identity")
    assert res.mode == "bwrap" and got is not None, res.stderr[-2000:]
    assert (got["uid"], got["euid"]) == (65534, 65534)
    assert int(got["cap_eff"], 16) == int(got["cap_prm"], 16) == int(got["cap_bnd"], 16) == 0
    assert got["seccomp"] == "2" and got["no_new_privs"] == "1"


def test_mounts_cannot_be_changed_or_removed(box):
    cfg, work, *_ = box
    got, res = attack(cfg, work, "mounts")
    assert got is not None, res.stderr[-2000:]
    for name in ("remount_root_rw", "remount_bind_rw", "umount_tmp", "umount_lazy"):
        assert got[name][0] != 0, (name, got[name])
    for name in ("mount_syscall", "umount2_syscall", "fsopen_syscall", "pivot_root", "chroot"):
        assert got[name] == [-1, EPERM], (name, got[name])


def test_privileged_and_kernel_surface_syscalls_are_refused(box):
    cfg, work, *_ = box
    got, res = attack(cfg, work, "privileges")
    assert got is not None, res.stderr[-2000:]
    assert got["setuid0"] in (
        EPERM,
        errno.EINVAL,
    )  # EINVAL: uid 0 does not even exist in the namespace
    for name in (
        "unshare_user",
        "unshare_net",
        "unshare_mount",
        "setns",
        "ptrace_traceme",
        "ptrace_attach_1",
        "bpf",
        "keyctl",
        "io_uring_setup",
        "userfaultfd",
        "perf_event_open",
        "mknod_char",
        "personality_no_aslr",
        "kexec_load",
        "init_module",
        "open_by_handle_at",
        "process_vm_readv",
        "swapoff",
        "syslog",
        "settimeofday",
        "acct",
    ):
        # EPERM from the filter: without it several of these succeed (PTRACE_TRACEME,
        # keyctl, io_uring_setup) or fail with another errno (setns EINVAL, ...).
        assert got[name] == [-1, EPERM], (name, got[name])
    assert got["clone3"] == [-1, ENOSYS]  # libc falls back to clone(), whose flags are filtered
    assert got["mknod_fifo"][0] == 0  # mknod is refused by file type, not wholesale
    assert got["threads_work"] and got["subprocess_works"]


def test_the_profile_knob_lets_perf_event_open_through_and_unknown_profiles_fail(box):
    cfg, work, *_ = box
    cfg.seccomp_profile = "profile"
    got, res = attack(cfg, work, "privileges")
    assert got is not None, res.stderr[-2000:]
    assert got["perf_event_open"][1] != EPERM  # the kernel's own answer (EACCES, ENOENT, EINVAL...)
    assert got["ptrace_traceme"] == [-1, EPERM] and got["bpf"] == [-1, EPERM]
    cfg.seccomp_profile = "no-such-profile"
    with pytest.raises(SandboxError, match="unknown seccomp profile"):
        attack(cfg, work, "identity")


def test_writes_outside_the_scratch_dir_fail_and_canaries_are_untouched(box):
    cfg, work, task, outside = box
    site_dir = Path(site.getsitepackages()[0])
    pkg = Path(__import__("kernelloop").__file__).parent
    targets = {
        "task": task / "reference.py",
        "task_new": task / "solution.py",
        "outside": outside / "history.db",
        "pth": site_dir / "kl-redteam.pth",
        "venv": Path(sys.prefix) / "pyvenv.cfg",
        "package": pkg / "kl_redteam.py",
        "usr": Path("/usr/lib/kl-redteam"),
        "root_dir": Path("/kl-redteam"),
        "etc": Path("/etc/kl-redteam"),
        "control": work / "ok.txt",
    }
    before = {k: (p.read_bytes() if p.is_file() else None) for k, p in targets.items()}
    got, res = attack(cfg, work, "writes", *map(str, targets.values()))
    assert got is not None, res.stderr[-2000:]
    result = {k: got[str(p)] for k, p in targets.items()}
    assert (
        result["control"] == "written"
    )  # the rw dir works: the refusals below are not an accident
    # Read-only mounts; for an ordinary user's launcher a file it does not own may be
    # refused for its permissions first (EACCES): refused either way.
    refused = {"EROFS"} if os.geteuid() == 0 else {"EROFS", "EACCES"}
    for k in ("task", "task_new", "pth", "venv", "package", "usr", "root_dir", "etc"):
        assert result[k] in refused, (k, result[k])
    assert result["outside"] == "ENOENT"  # never bound: not even visible
    for k, p in targets.items():
        if k != "control":
            assert (p.read_bytes() if p.is_file() else None) == before[k], k


def test_only_the_allow_list_is_visible(box):
    cfg, work, task, outside = box
    paths = [
        str(outside / "history.db"),
        str(ROOT / ".git"),
        "/etc/shadow",
        "/var",
        "/run",
        "/root/.ssh",
        "/sys/fs/cgroup",
        "/sys/kernel",
        str(task / "reference.py"),
        "/sys/devices/system/cpu",
    ]
    got, res = attack(cfg, work, "visible", *paths)
    assert got is not None, res.stderr[-2000:]
    for p in paths[:-2]:
        assert got[p] is False, p
    assert got[str(task / "reference.py")] and got["/sys/devices/system/cpu"]
    assert not [
        d for d in got["dev"] if d.startswith(("nvidia", "sd", "nvme", "vd", "mem", "kmsg"))
    ], got["dev"]
    assert set(got["etc"]) <= {
        "passwd",
        "group",
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "alternatives",
        "localtime",
        "timezone",
        "locale.alias",
    } | {e for e in got["etc"] if e.startswith("python3")}


def test_no_secret_of_the_launcher_is_reachable(box, monkeypatch):
    cfg, work, *_ = box
    secret = "sk-redteam-7f3a9c-never-inside"
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "HF_TOKEN"):
        monkeypatch.setenv(var, secret)
    monkeypatch.setenv("HTTPS_PROXY", f"http://user:{secret}@proxy:3128")
    cfg.extra_env = {"MY_SERVICE_TOKEN": secret, "UPSTREAM_API_KEY": secret, "FINE": "1"}
    got, res = attack(cfg, work, "secrets")
    assert got is not None, res.stderr[-2000:]
    assert got["self"].get(MARKER) and got["self"]["FINE"] == "1"  # the environ read works
    readable = [
        k for k, v in got.items() if k.endswith("/environ") and not str(v).startswith("error")
    ]
    assert readable, "the attack read no /proc/*/environ at all: it proves nothing"
    texts = [json.dumps(got["self"])]
    texts += [
        base64.b64decode(v).decode(errors="replace")
        for k, v in got.items()
        if "/" in k and not str(v).startswith("error")
    ]
    assert not [t for t in texts if secret in t]
    # A pid namespace of its own: the launcher and the host's processes are not there.
    pids = {int(k.split("/")[0]) for k in got if k.split("/")[0].isdigit()}
    assert os.getpid() not in pids or max(pids) < 50 and len(pids) <= 5, pids


@pytest.mark.parametrize("where", ["/tmp/fill", "/dev/shm/fill", "/home/sandbox/fill"])
def test_private_scratch_fills_stop_at_the_size_cap(box, where):
    cfg, work, *_ = box
    cfg.scratch_bytes = 8 << 20
    got, res = attack(cfg, work, "fill", where, 64)
    assert got is not None, res.stderr[-2000:]
    assert got["error"] == "ENOSPC" and got["written"] <= 8 << 20, got


def test_a_file_in_the_work_dir_stops_at_the_file_size_limit(box):
    cfg, work, *_ = box
    cfg.max_file_bytes = 4 << 20
    got, res = attack(cfg, work, "fill", str(work / "big"), 64)
    assert got is not None, res.stderr[-2000:]
    assert got["error"] == "EFBIG" and got["written"] <= 4 << 20, got
    assert (work / "big").stat().st_size <= 4 << 20


def test_a_fork_bomb_is_bounded_and_nothing_survives(box):
    cfg, work, *_ = box
    cfg.max_processes, cfg.timeout_s = 64, 10
    sp = SandboxProcess([sys.executable, "-", "forkbomb", "500"], work, cfg, HOSTILE)
    first = next(iter(sp.lines()), b"")
    assert _marked(sp.marker), "the bomb's processes should be running now"
    res = sp.finish()
    got = json.loads(first) if first.startswith(b"{") else None
    assert got is not None, res.stderr[-2000:]
    if res.limits["processes"].startswith("none"):
        assert any("process-count" in w for w in res.warnings)  # said, never silent
        pytest.skip(f"no process-count limit can be applied here: {res.limits['processes']}")
    assert got["forked"] < 64 and got["error"] == "EAGAIN", got
    assert _marked(sp.marker) == [], "processes of the sandbox outlived it"
    assert all(not d.exists() for d in sp.cgroup.dirs)


def test_the_memory_cap_stops_a_hog(box):
    cfg, work, *_ = box
    cfg.max_memory_bytes = 256 << 20
    got, res = attack(cfg, work, "memory", 1024)
    if not res.limits["memory"].startswith("cgroup"):
        pytest.skip(f"no memory cgroup here: {res.limits['memory']}")
    assert got is None or "allocated_mb" not in got, got
    assert res.returncode != 0 or (got and got.get("error") == "MemoryError")


def test_a_huge_stderr_keeps_only_its_tail(box):
    cfg, work, *_ = box
    got, res = attack(cfg, work, "stderr", 20)
    assert got == {"done": True}, res.stderr[-500:]
    assert len(res.stderr) <= cfg.stderr_keep_bytes + 100
    assert res.stderr.rstrip().endswith(b"THE-LAST-LINE-OF-STDERR")
    assert res.stderr_dropped >= (20 << 20) - cfg.stderr_keep_bytes


def test_an_overlong_channel_line_ends_the_channel_with_a_protocol_problem(box):
    cfg, work, *_ = box
    cfg.max_line_bytes, cfg.timeout_s = 1 << 20, 120
    t0 = time.monotonic()
    got, res = attack(cfg, work, "long_line", 4 << 20)
    assert res.protocol and "longer than 1048576 bytes" in res.protocol
    assert not res.timed_out and time.monotonic() - t0 < 60  # killed at once, not at the timeout
    assert len(res.stdout) < 1 << 20


def test_there_is_no_network_not_even_loopback(box):
    cfg, work, *_ = box
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    try:
        got, res = attack(cfg, work, "network", server.getsockname()[1])
        assert got is not None, res.stderr[-2000:]
        assert got["127.0.0.1"] != "connected" and got["::1"] != "connected", got
        assert got["dns"] != "resolved"
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


def test_an_escaped_daemon_does_not_outlive_the_sandbox(box):
    cfg, work, *_ = box
    tag = f"kl-redteam-escape-{os.getpid()}"
    got, res = attack(cfg, work, "escape", tag)
    assert got == {"spawned": True}, res.stderr[-2000:]
    time.sleep(0.5)
    alive = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and tag.encode() in (p / "cmdline").read_bytes():
                alive.append(int(p.name))
        except OSError:
            continue
    assert alive == []


def test_auto_means_bubblewrap_and_the_unshare_mode_is_gone(box):
    cfg, work, *_ = box
    assert detect_mode("auto") == "bwrap"
    with pytest.raises(SandboxError, match="removed"):
        detect_mode("unshare")
    cfg.mode = "none"
    got, res = attack(cfg, work, "identity")
    assert res.mode == "none" and any("NO SANDBOX" in w for w in res.warnings)
