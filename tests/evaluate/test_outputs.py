"""The out dir as the trusted side reads it: hostile entries where an output should be.

Every entry kind a candidate can create in the out dir (a symlink to a file outside, a
hard link to one, a fifo, a directory, a socket, a device node, a file of the wrong
size, a replaced out dir) goes through the real path (`_consume` + `Judge` +
`OutputDir`), by hand and fuzzed. Nothing outside the out dir may be read, changed or
removed (a canary beside it, and its folder's listing), nothing may block or raise, and
every case is a protocol rejection; a regular file of the right size is not.
"""

from __future__ import annotations

import os
import socket
import stat
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelloop.evaluate.trusted.channel.outputs import OutputDir, OutputError
from kernelloop.evaluate.trusted.run import _consume
from kernelloop.evaluate.trusted.values.judge import Judge
from tests.evaluate import channel_cases as cc
from tests.evaluate.test_channel_fuzz import IDS, KEY, PLAN, TASK, Lines
from tests.redteam.harness import Canary

NBYTES = 7 * 129 * 4  # the first call's output: 7x129 float32
CID = IDS[0]
KINDS = [
    "symlink_canary",
    "symlink_relative",
    "symlink_dir",
    "hardlink",
    "hardlink_sized",
    "symlink_sized",
    "fifo",
    "directory",
    "socket",
    "device",
    "wrong_size",
    "empty",
    "regular",
]
EXAMPLES = 300


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("outputs")
    out = root / "work" / "out"
    out.mkdir(parents=True)
    canary = Canary.plant(root / "outside")
    # A file outside of exactly the output's size: only the link checks keep it out.
    sized = canary.path.parent / "sized.bin"
    sized.write_bytes(b"\0" * NBYTES)
    return {"root": root, "out": out, "canary": canary, "sized": sized, "judge": Judge(TASK, "cpu")}


def plant(place, kind: str, delta: int = 1) -> None:
    """Make `out/<CID>.bin` the hostile entry `kind`."""
    path, canary = place["out"] / f"{CID}.bin", place["canary"].path
    if kind == "symlink_canary":
        os.symlink(canary, path)
    elif kind == "symlink_relative":
        os.symlink(os.path.relpath(canary, path.parent), path)
    elif kind == "symlink_dir":
        os.symlink(canary.parent, path)
    elif kind == "hardlink":
        os.link(canary, path)  # same filesystem: both under the test's tmp dir
    elif kind == "hardlink_sized":
        os.link(place["sized"], path)
    elif kind == "symlink_sized":
        os.symlink(place["sized"], path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
        (path / "inner").write_bytes(b"x")
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    elif kind == "device":
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    elif kind == "wrong_size":
        path.write_bytes(b"\0" * max(0, NBYTES + delta))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "regular":
        path.write_bytes(b"\0" * NBYTES)


def consume(place, msg: dict) -> dict:
    judge = place["judge"]
    judge.failures.clear()
    judge.checks.clear()
    before = sorted(os.listdir(place["canary"].path.parent))
    done = {}

    def go():
        with OutputDir(place["out"]) as outputs:
            done["state"] = _consume(
                Lines([cc.encode(cc.hello(), KEY), cc.encode(msg, KEY)]),
                PLAN,
                judge,
                outputs,
                lambda _m: None,
                KEY,
                100,
            )

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "reading the output blocked"
    assert place["canary"].intact()
    assert place["sized"].read_bytes() == b"\0" * NBYTES and place["sized"].stat().st_nlink == 1
    assert sorted(os.listdir(place["canary"].path.parent)) == before
    for p in place["out"].iterdir():  # whatever is left (a directory is never removed)
        if p.is_dir() and not p.is_symlink():
            for q in p.iterdir():
                q.unlink()
            p.rmdir()
        else:
            p.unlink()
    state = done["state"]
    state["judge"] = judge
    return state


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_output_entry(place, kind):
    if kind == "device" and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    plant(place, kind)
    state = consume(place, cc.call_tensor(CID))
    if kind == "regular":
        assert not state["protocol"], state["protocol"]
        assert (
            state["judge"].failures and state["judge"].failures[0].category != "protocol"
        )  # zeros: judged wrong
    else:
        assert state["protocol"].startswith(f"{CID}: "), state["protocol"]
        assert [f.category for f in state["judge"].failures] == ["protocol"]


@settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(
    kind=st.sampled_from([k for k in KINDS if k != "device" or os.geteuid() == 0]),
    delta=st.integers(-NBYTES, 1 << 16).filter(lambda d: d != 0),
    file=st.sampled_from(
        [
            None,
            f"{CID}.bin",
            "../outside/canary.txt",
            "/etc/hostname",
            f"../{CID}.bin",
            f"{IDS[1]}.bin",
            "canary.txt",
            f"{CID}.bin/.",
            ".",
        ]
    ),
)
def test_fuzzed_output_entries_never_escape_the_out_dir(place, kind, delta, file):
    plant(place, kind, delta)
    msg = cc.call_tensor(CID, file=False)
    if file is not None:
        msg["file"] = file
    state = consume(place, msg)
    if kind == "regular" and file in (None, f"{CID}.bin"):
        assert not state["protocol"]
    else:
        assert state["protocol"], (kind, delta, file)


def test_a_replaced_out_dir_does_not_redirect_the_trusted_side(place, tmp_path):
    """The worker renames the out dir away and puts a symlink to the canary's folder in its
    place: reads and removals go to the directory opened before, never through the link."""
    work = tmp_path / "work"
    out = work / "out"
    out.mkdir(parents=True)
    canary = Canary.plant(tmp_path / "outside")
    os.link(canary.path, canary.path.parent / f"{CID}.bin")  # a file of that name beside the canary
    with OutputDir(out) as outputs:
        out.rename(work / "moved")
        os.symlink(canary.path.parent, out)
        with pytest.raises(OutputError, match="no output file"):
            outputs.read(CID, canary.path.stat().st_size)
        outputs.discard(CID)
        outputs.purge()
    assert canary.intact() and (canary.path.parent / f"{CID}.bin").exists()


@pytest.mark.parametrize("bad", ["../x", "a/b", "/etc/passwd", "", "x" * 200, "a\0b", 5, None])
def test_only_plain_call_ids_name_a_file(tmp_path, bad):
    with OutputDir(tmp_path) as outputs, pytest.raises(OutputError, match="not a call id"):
        outputs.read(bad, 1)


def test_a_regular_output_is_read_exactly_and_removed(tmp_path):
    (tmp_path / f"{CID}.bin").write_bytes(bytes(range(256)) * 4)
    with OutputDir(tmp_path) as outputs:
        assert bytes(outputs.read(CID, 1024)) == bytes(range(256)) * 4
    assert not (tmp_path / f"{CID}.bin").exists()


def test_a_symlinked_out_dir_is_refused_when_opened(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "out")
    with pytest.raises(OSError):
        OutputDir(tmp_path / "out")
