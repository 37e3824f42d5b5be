"""The task folder's entries: what the digest hashes, and the snapshot/restore around an
evaluation (task/files.py). Restoring must undo any change without writing through a
link the candidate planted, and taking a snapshot must never follow one."""

from __future__ import annotations

import os
import shutil

import pytest

from kernelloop.task import files
from tests.conftest import FLAGSHIP


@pytest.fixture
def task_dir(tmp_path):
    d = tmp_path / "task"
    shutil.copytree(FLAGSHIP, d, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside, never to be written")
    return d


def test_restore_undoes_every_kind_of_change_without_writing_through_links(task_dir):
    outside = task_dir.parent / "outside"
    snap = files.entries(task_dir)
    (task_dir / "inputs.py").write_text("changed")
    (task_dir / "reference.py").unlink()
    os.symlink(outside / "secret.txt", task_dir / "reference.py")  # a write would land outside
    shutil.rmtree(task_dir / "candidates")
    os.symlink(outside, task_dir / "candidates")  # a folder replaced by a link to one outside
    (task_dir / "__pycache__").mkdir()
    (task_dir / "__pycache__" / "reference.cpython-312.pyc").write_bytes(b"evil")
    os.mkfifo(task_dir / "fifo")
    (task_dir / "scripted" / "new.py").write_text("added")
    assert files.entries(task_dir) != snap
    files.restore(task_dir, snap)
    assert files.entries(task_dir) == snap
    assert (outside / "secret.txt").read_text() == "outside, never to be written"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (
        not (task_dir / "reference.py").is_symlink() and not (task_dir / "candidates").is_symlink()
    )


def test_a_snapshot_records_links_and_special_files_without_reading_them(task_dir):
    os.symlink("/dev/zero", task_dir / "zero")
    os.mkfifo(task_dir / "pipe")
    snap = files.entries(task_dir)  # would block on the fifo or read forever through the link
    assert snap["zero"] == ("link", b"/dev/zero") and snap["pipe"] == ("other", b"")


def test_the_digest_covers_everything_but_the_loop_state(task_dir):
    before = files.digest(task_dir)
    (task_dir / ".kernelloop").mkdir()
    (task_dir / ".kernelloop" / "history.sqlite").write_bytes(b"rows")
    (task_dir / ".git").mkdir()
    (task_dir / ".git" / "HEAD").write_text("ref: refs/heads/main")
    assert files.digest(task_dir) == before  # the loop's own state and its variant store
    for change in (
        lambda: (task_dir / "scripted" / ".hidden").write_text("x"),
        lambda: os.symlink("inputs.py", task_dir / "alias.py"),
        lambda: (task_dir / "sub" / ".kernelloop").mkdir(parents=True),
    ):
        change()
        after = files.digest(task_dir)
        assert after != before
        before = after
