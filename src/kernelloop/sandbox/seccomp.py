"""The seccomp filter bubblewrap loads into the sandbox (`--seccomp FD`).

Default action: allow. The syscalls below return an error instead: they administer the
machine, change mounts or namespaces, reach other processes' memory, or widen the
kernel's attack surface for nothing a kernel benchmark needs. The filter is compiled by
libseccomp (through `pyseccomp`, ctypes over the system's libseccomp2), which also
rejects foreign ABIs (i386 `int 0x80`, x32) with a kill, so a denied call cannot be
reached through another syscall table.

The lists are data: a profile is a name -> the syscalls it denies. `worker` is the
default; `profile` is for Nsight Compute, which reads hardware counters through
perf_event_open. What ncu needs beyond that must be measured on a GPU and added here.
"""

from __future__ import annotations

import errno
import os
import stat

from kernelloop.errors import SandboxError

# Denied with EPERM in every profile.
_ALWAYS = (
    # mounts, old and new API, and changing root
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    # namespaces (clone with CLONE_NEW* is filtered by flag below)
    "setns",
    "unshare",
    # other processes' memory and descriptors
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    # kernel attack surface and administration
    "bpf",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "fanotify_init",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "acct",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "iopl",
    "ioperm",
    "vhangup",
    "nfsservctl",
)

PROFILES: dict[str, tuple[str, ...]] = {
    "worker": (*_ALWAYS, "perf_event_open"),
    # Nsight Compute: hardware counters. ncu's other needs are unmeasured (see docs/security.md).
    "profile": _ALWAYS,
}

# clone() with any of these flags creates a namespace: refused (bwrap's --disable-userns
# covers user namespaces too; this covers the rest, which need no capability in a userns).
CLONE_NS_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
    "CLONE_NEWTIME": 0x00000080,
}
# personality() flags refused: switching address-space randomization off, executable data.
PERSONALITY_DENIED_FLAGS = {"ADDR_NO_RANDOMIZE": 0x0040000, "READ_IMPLIES_EXEC": 0x0400000}

_S_IFMT = 0o170000  # the file-type bits of a mode

_FIX = (
    "libseccomp is missing, and the sandbox never runs without its seccomp filter; "
    "install it (apt-get install libseccomp2, and `pip install pyseccomp`) or pass --sandbox none."
)


def _library():
    try:
        import pyseccomp
    except (ImportError, RuntimeError, OSError) as e:  # RuntimeError: "Unable to find libseccomp"
        raise SandboxError(_FIX) from e
    return pyseccomp


def check_available() -> None:
    """Raise SandboxError with the fix if the filter cannot be built here."""
    _library()


def denied(profile: str) -> tuple[str, ...]:
    if profile not in PROFILES:
        raise SandboxError(f"unknown seccomp profile {profile!r}; use one of {sorted(PROFILES)}.")
    return PROFILES[profile]


def build_filter(profile: str = "worker"):
    """The libseccomp filter for `profile` (a pyseccomp.SyscallFilter)."""
    sc = _library()
    names = denied(profile)
    flt = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in names:
        # A name this libseccomp does not know may still be a syscall of this kernel:
        # refuse to build a filter with a hole in it.
        if sc.resolve_syscall(sc.Arch.NATIVE, name) < 0:
            raise SandboxError(
                f"libseccomp does not know the syscall {name!r}; upgrade libseccomp2."
            )
        flt.add_rule(eperm, name)
    for flag in CLONE_NS_FLAGS.values():
        flt.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory a filter cannot read: make libc fall back to clone.
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for call, mode_arg in (("mknod", 1), ("mknodat", 2)):
        for kind in (stat.S_IFCHR, stat.S_IFBLK):
            flt.add_rule(eperm, call, sc.Arg(mode_arg, sc.MASKED_EQ, _S_IFMT, kind))
    # personality(): refuse the flags that switch ASLR off or make readable memory executable.
    # Bit 31 is in the mask so that the query personality(0xffffffff) stays allowed.
    for flag in PERSONALITY_DENIED_FLAGS.values():
        flt.add_rule(eperm, "personality", sc.Arg(0, sc.MASKED_EQ, flag | 0x80000000, flag))
    return flt


def filter_fd(profile: str = "worker") -> int:
    """A memfd holding the compiled BPF program, positioned at 0, for `bwrap --seccomp FD`."""
    flt = build_filter(profile)
    fd = os.memfd_create("kernelloop-seccomp", 0)
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            flt.export_bpf(f)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
