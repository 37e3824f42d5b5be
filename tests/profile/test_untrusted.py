"""Reading a sandboxed run's work dir: no symlink, FIFO or oversized file gets through,
and candidate-shaped text is cleaned before anyone shows it."""

from __future__ import annotations

import os
import threading

import pytest

from kernelloop.profile.ncu_csv import MAX_KERNELS, parse_raw_kernels
from kernelloop.profile.untrusted import UntrustedFile, clean, open_dir, read_regular, write_new


@pytest.fixture
def work(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    fd = open_dir(d)
    yield d, fd
    os.close(fd)


def test_a_regular_file_is_read(work):
    d, fd = work
    (d / "ncu.csv").write_bytes(b"ID,Kernel Name\n")
    assert read_regular(fd, "ncu.csv", 100) == b"ID,Kernel Name\n"


def test_a_symlink_is_not_followed(work, tmp_path):
    d, fd = work
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    (d / "ncu.csv").symlink_to(secret)
    with pytest.raises(UntrustedFile, match="not a regular file"):
        read_regular(fd, "ncu.csv", 1 << 20)
    (d / "env").symlink_to("/proc/self/environ")
    with pytest.raises(UntrustedFile):
        read_regular(fd, "env", 1 << 20)


def test_a_fifo_does_not_block_the_reader(work):
    d, fd = work
    os.mkfifo(d / "ncu.csv")
    done = threading.Event()

    def read():
        with pytest.raises(UntrustedFile, match="not a regular file"):
            read_regular(fd, "ncu.csv", 100)
        done.set()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    assert done.is_set(), "reading a FIFO blocked"


def test_oversized_and_missing_files_are_refused(work):
    d, fd = work
    (d / "big.csv").write_bytes(b"x" * 101)
    with pytest.raises(UntrustedFile, match="101 bytes"):
        read_regular(fd, "big.csv", 100)
    with pytest.raises(UntrustedFile, match="was not written"):
        read_regular(fd, "absent.csv", 100)
    with pytest.raises(ValueError):
        read_regular(fd, "../escape", 100)


def test_write_new_replaces_a_planted_symlink_instead_of_writing_through_it(work, tmp_path):
    d, fd = work
    target = tmp_path / "trusted.json"
    target.write_text("trusted")
    (d / "job.json").symlink_to(target)
    write_new(fd, "job.json", b"{}")
    assert target.read_text() == "trusted"
    assert not (d / "job.json").is_symlink() and (d / "job.json").read_bytes() == b"{}"


def test_clean_strips_controls_and_cuts():
    assert clean("k\x1b[31mernel\nname\u202e\x00", 100) == "k [31mernel name"
    assert clean("a" * 50, 10) == "a" * 9 + "…"
    assert clean(None, 10) == "None"


def test_csv_text_is_cleaned_and_bounded():
    rows = [
        '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value",'
        '"Rule Name","Rule Type","Rule Description"'
    ]
    evil = "x\x1b]0;pwned\x07" + "A" * 5000
    rows += [
        f'"{i}","{evil}","S","m","byte","1e400","R","OPT","{evil}"' for i in range(MAX_KERNELS + 10)
    ]
    kernels = parse_raw_kernels("\n".join(rows))
    assert len(kernels) == MAX_KERNELS
    k = kernels[0]
    assert len(k.name) <= 200 and "\x1b" not in k.name and "\x07" not in k.name
    assert len(k.rules[0].description) <= 600 and "\x1b" not in k.rules[0].description
    assert k.get("m") is None  # 1e400 is not a finite number


@pytest.mark.parametrize(
    "text",
    [
        '"ID","Kernel Name"\n"1e400","k"\n',
        '"ID","Kernel Name","Metric Name"\n"1","k","a\x00b"\n',
        '"ID","Kernel Name","Block Size"\n"1","k","(99999999999999999999, 1, 1)"\n',
        '"ID","Metric Name"\n' + '"1",' * 3 + "\n",
        '"ID","Kernel Name"\n"1","' + "z" * 200_000 + '"\n',
    ],
)
def test_malformed_csv_raises_value_error_at_most(text):
    try:
        parse_raw_kernels(text)
    except ValueError:
        pass
