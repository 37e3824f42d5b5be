"""The sandbox's command line and its refusals, checked without a GPU.

The GPU part builds the real argv against a fake driver listing (four GPUs whose device
minors are not in PCI order) and fake device nodes: what it proves is which nodes and
which CUDA_VISIBLE_DEVICES the worker would get; the H200 run checks CUDA works with them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kernelloop.errors import SandboxError
from kernelloop.sandbox import SandboxConfig, bwrap, mounts, seccomp
from kernelloop.sandbox.bwrap_argv import bwrap_command


@pytest.fixture
def fake_gpus(tmp_path, monkeypatch):
    drv, dev = tmp_path / "gpus", tmp_path / "dev"
    drv.mkdir()
    dev.mkdir()
    # PCI order 0..3 -> minors 2, 0, 3, 1
    for i, (bus, minor) in enumerate(
        [("0000:18:00.0", 2), ("0000:2a:00.0", 0), ("0000:3a:00.0", 3), ("0000:5d:00.0", 1)]
    ):
        (drv / bus).mkdir()
        (drv / bus / "information").write_text(
            "Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\n"
            f"GPU UUID: \t GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd\nBus Location: \t {bus}\n"
            f"Device Minor: \t {minor}\n"
        )
    for name in (
        "nvidia0",
        "nvidia1",
        "nvidia2",
        "nvidia3",
        "nvidiactl",
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia-modeset",
    ):
        (dev / name).write_text("")
    monkeypatch.setattr(mounts, "DRIVER_GPUS", drv)
    monkeypatch.setattr(mounts, "DEV", dev)
    return dev


def _dev_binds(argv: list[str]) -> dict[str, str]:
    return {argv[i + 2]: argv[i + 1] for i, a in enumerate(argv) if a == "--dev-bind"}


@pytest.mark.parametrize("index, minor", [(0, 2), (2, 3), (3, 1)])
def test_only_the_assigned_gpus_node_is_bound(fake_gpus, index, minor, tmp_path):
    cfg = SandboxConfig(gpu=True, gpu_index=index, rw_paths=[tmp_path])
    argv, env, fds = bwrap_command([sys.executable, "-c", "1"], cfg, "m")
    for fd in fds:
        os.close(fd)
    binds = _dev_binds(argv)
    assert binds == {
        f"/dev/nvidia{minor}": str(fake_gpus / f"nvidia{minor}"),
        "/dev/nvidiactl": str(fake_gpus / "nvidiactl"),
        "/dev/nvidia-uvm": str(fake_gpus / "nvidia-uvm"),
        "/dev/nvidia-uvm-tools": str(fake_gpus / "nvidia-uvm-tools"),
    }
    assert env["CUDA_VISIBLE_DEVICES"] == f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_gpu_defaults_to_index_0_and_a_missing_gpu_is_a_clear_error(fake_gpus, tmp_path):
    argv, env, fds = bwrap_command(["true"], SandboxConfig(gpu=True), "m")
    for fd in fds:
        os.close(fd)
    assert "/dev/nvidia2" in _dev_binds(argv)  # index 0 is the GPU with minor 2
    with pytest.raises(SandboxError, match="GPU index 4 does not exist here"):
        bwrap_command(["true"], SandboxConfig(gpu=True, gpu_index=4), "m")


def test_without_a_gpu_no_nvidia_node_and_no_visible_devices(fake_gpus, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    argv, env, fds = bwrap_command(["true"], SandboxConfig(), "m")
    for fd in fds:
        os.close(fd)
    assert _dev_binds(argv) == {}
    assert "CUDA_VISIBLE_DEVICES" not in env


def test_the_flags_that_remove_privileges_are_always_there(tmp_path):
    argv, env, fds = bwrap_command(["true"], SandboxConfig(rw_paths=[tmp_path]), "m")
    for fd in fds:
        os.close(fd)
    joined = " ".join(argv)
    for flag in (
        "--unshare-all --unshare-user --uid 65534 --gid 65534 --cap-drop ALL --disable-userns "
        "--die-with-parent --new-session",
        "--seccomp ",
        "--remount-ro / --chdir /tmp --",
    ):
        assert flag in joined, flag
    assert "--ro-bind / /" not in joined and "--bind / /" not in joined
    i = argv.index("--remount-ro")
    assert argv.index("--bind") < i  # every mount is in place before the root turns read-only
    assert [argv[k + 1] for k, a in enumerate(argv) if a == "--bind"] == [str(tmp_path.resolve())]
    sizes = {argv[k + 3]: int(argv[k + 1]) for k, a in enumerate(argv) if a == "--size"}
    assert sizes == {"/tmp": 1 << 30, "/dev/shm": 1 << 30, "/home/sandbox": 1 << 30}


def test_mounts_come_parents_first(tmp_path):
    inner = tmp_path / "task"
    (inner / ".kernelloop").mkdir(parents=True)
    plan = mounts.plan(
        ro={inner},
        rw=[tmp_path],
        hidden=[inner / ".kernelloop"],
        gpu_index=None,
        scratch={Path("/tmp"): 1 << 20},
    )
    order = [(m.kind, str(m.dest)) for m in plan]
    tmp_i = order.index(("tmpfs", "/tmp"))
    rw_i = order.index(("rw", str(tmp_path.resolve())))
    ro_i = order.index(("ro", str(inner.resolve())))
    hide_i = order.index(("tmpfs", str((inner / ".kernelloop").resolve())))
    assert (
        tmp_i < rw_i < ro_i < hide_i
    )  # the task stays read-only inside a writable dir, its state hidden


def test_pythonpath_entries_outside_the_binds_and_secret_variables_never_reach_the_worker(
    tmp_path, monkeypatch
):
    extra = tmp_path / "extra-lib"
    extra.mkdir()
    gone = tmp_path / "gone"
    monkeypatch.setenv(
        "PYTHONPATH",
        os.pathsep.join([str(gone), "relative/dir", str(extra), str(mounts.PACKAGE_ROOT)]),
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("HTTPS_PROXY", "http://p")
    cfg = SandboxConfig(extra_env={"A_TOKEN": "t", "B_API_KEY": "k", "OK": "1"})
    argv, env, fds = bwrap_command(["true"], cfg, "m")
    for fd in fds:
        os.close(fd)
    # An existing directory is bound read-only and kept; a missing or relative one is dropped.
    assert env["PYTHONPATH"] == os.pathsep.join([str(extra), str(mounts.PACKAGE_ROOT)])
    assert argv[argv.index(str(extra)) - 1] == "--ro-bind"
    assert not {"OPENAI_API_KEY", "HTTPS_PROXY", "A_TOKEN", "B_API_KEY"} & set(env)
    assert env["OK"] == "1" and env["HOME"] == "/home/sandbox" and env["TMPDIR"] == "/tmp"


def test_the_filter_denies_the_listed_syscalls_in_every_profile():
    must = {
        "mount",
        "umount2",
        "pivot_root",
        "ptrace",
        "bpf",
        "setns",
        "unshare",
        "keyctl",
        "add_key",
        "request_key",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "userfaultfd",
        "open_by_handle_at",
        "name_to_handle_at",
        "process_vm_readv",
        "process_vm_writev",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "swapon",
        "swapoff",
        "reboot",
        "settimeofday",
        "clock_settime",
        "adjtimex",
        "syslog",
        "acct",
        "quotactl",
        "chroot",
    }
    for name in seccomp.PROFILES:
        assert must <= set(seccomp.denied(name)), name
        seccomp.build_filter(name)  # every name resolves in this libseccomp
    assert "perf_event_open" in seccomp.denied(
        "worker"
    ) and "perf_event_open" not in seccomp.denied("profile")


def test_a_missing_libseccomp_refuses_to_sandbox_instead_of_running_unfiltered(
    monkeypatch, tmp_path
):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # import fails as on a machine without it
    monkeypatch.setattr(bwrap, "_MODE_CACHE", {})
    with pytest.raises(SandboxError, match=r"libseccomp is missing.*apt-get install libseccomp2"):
        bwrap.detect_mode("auto")
    with pytest.raises(SandboxError, match="libseccomp is missing"):
        bwrap_command(["true"], SandboxConfig(), "m")


def test_a_missing_bubblewrap_is_an_error_with_the_fix(monkeypatch):
    monkeypatch.setattr(bwrap, "_MODE_CACHE", {})
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: None)
    with pytest.raises(SandboxError, match=r"apt-get install bubblewrap"):
        bwrap.detect_mode("auto")
    assert bwrap.detect_mode("none") == "none"


def test_a_bubblewrap_that_cannot_start_is_diagnosed_not_bypassed(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(bwrap, "_MODE_CACHE", {})
    monkeypatch.setenv("KERNELLOOP_BWRAP", str(fake))
    with pytest.raises(
        SandboxError,
        match=r"cannot create its namespaces.*(seccomp=unconfined|max_user_namespaces)",
    ):
        bwrap.detect_mode("bwrap")


def test_diagnoses_name_the_fix():
    msg = bwrap.diagnose("bwrap: Can't mount proc on /newroot/proc: Operation not permitted")
    assert "systempaths=unconfined" in msg and msg.count(".") >= 1
    assert "pass --sandbox none" in bwrap.diagnose("bwrap: something else entirely")
