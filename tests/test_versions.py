"""Variants as git commits, in real repositories in temp folders."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernelloop.versions import Versions, VersionsError, ref_component

# Bytes a text round trip would damage: trailing whitespace, CRLF, a tab, no final newline.
AWKWARD = (
    b"import triton\r\nBLOCK = 1024   \n\tx = 1  \t\n# \xc3\xa9t\xc3\xa9\nno_final_newline = True"
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=Dev", "-c", "user.email=dev@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def user_state(repo: Path) -> tuple[str, str, str, str]:
    """What the user sees: HEAD, the index, the working tree, their branches."""
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "-q", "--verify", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout
    return (
        head,
        git(repo, "diff", "--cached"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        "".join(
            ln
            for ln in git(repo, "for-each-ref", "refs/heads").splitlines(True)
            if "kernelloop/" not in ln
        ),
    )


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    """A user's repository with history, a staged change and an unstaged one."""
    repo = tmp_path / "repo"
    (repo / "ops" / "softmax" / "kernel").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(repo))
    (repo / "README.md").write_text("team kernels\n")
    (repo / "ops" / "softmax" / "kernel" / "baseline.py").write_bytes(b"BLOCK = 512\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "initial")
    (repo / "README.md").write_text("team kernels, staged edit\n")
    git(repo, "add", "README.md")
    (repo / "ops" / "softmax" / "kernel" / "baseline.py").write_bytes(b"BLOCK = 1024\n")  # unstaged
    return repo


def test_inside_a_users_repo_variants_never_touch_head_index_or_worktree(user_repo):
    before = user_state(user_repo)
    v = Versions.open(user_repo / "ops" / "softmax", "softmax", "kernel/baseline.py")
    assert v.repo == user_repo.resolve() and v.kernel_path == "ops/softmax/kernel/baseline.py"
    base = v.commit_baseline(1, b"BLOCK = 1024\n")
    var = v.commit_variant(1, 2, 1, b"BLOCK = 2048\n", "Bigger blocks.", proposal_id=7)
    assert user_state(user_repo) == before

    assert base.branch == "refs/heads/kernelloop/softmax/1/r0-baseline"
    assert var.branch == "refs/heads/kernelloop/softmax/1/r2-1"
    head = git(user_repo, "rev-parse", "HEAD").strip()
    assert git(user_repo, "rev-parse", f"{base.commit}^").strip() == head
    assert (
        git(user_repo, "rev-parse", f"{var.commit}^").strip() == base.commit
    )  # made from the best
    assert v.best() == base.commit
    # the rest of the user's tree is carried along, as committed
    assert git(user_repo, "show", f"{var.commit}:README.md") == "team kernels\n"
    assert "Kernelloop-Proposal: 7" in git(user_repo, "log", "-1", "--format=%B", var.commit)


def test_outside_any_repo_a_repo_is_initialized_and_the_task_snapshotted(tmp_path):
    folder = tmp_path / "task"
    (folder / "kernel").mkdir(parents=True)
    (folder / "kernel" / "baseline.py").write_bytes(b"BLOCK = 1024\n")
    (folder / "task.toml").write_text("[task]\nname='t'\n")
    (folder / ".kernelloop").mkdir()
    (folder / ".kernelloop" / ".gitignore").write_text("*\n")
    (folder / ".kernelloop" / "history.sqlite").write_bytes(b"state")
    v = Versions.open(folder, "t", "kernel/baseline.py")
    assert (folder / ".git").is_dir()
    base = v.commit_baseline(1, b"BLOCK = 1024\n")
    files = git(folder, "ls-tree", "-r", "--name-only", base.commit).split()
    assert files == ["kernel/baseline.py", "task.toml"]  # the workspace stays out
    assert not (folder / ".git" / "index").exists()  # no index was ever written
    assert git(folder, "status", "--porcelain") == "?? kernel/\n?? task.toml\n"
    # a second run reuses the same snapshot rather than forking a new root
    assert Versions.open(folder, "t", "kernel/baseline.py").base_commit() == v.base_commit()


def test_restore_is_byte_identical_even_with_autocrlf_and_backs_up_what_it_replaces(user_repo):
    git(user_repo, "config", "core.autocrlf", "true")
    kernel = user_repo / "ops" / "softmax" / "kernel" / "baseline.py"
    v = Versions.open(user_repo / "ops" / "softmax", "softmax", "kernel/baseline.py")
    v.commit_baseline(1, kernel.read_bytes())
    old = v.commit_variant(1, 1, 1, AWKWARD, "awkward bytes")
    v.commit_variant(1, 2, 1, b"BLOCK = 4096\n", "later")
    kernel.write_bytes(b"# hand edit in progress\n")
    backup = v.restore(old.commit, kernel)
    assert kernel.read_bytes() == AWKWARD
    assert (
        backup
        and git(user_repo, "show", f"{backup}:ops/softmax/kernel/baseline.py")
        == "# hand edit in progress\n"
    )
    assert v.restore(old.commit, kernel) is None  # nothing new to save the second time
    assert v.read(v.resolve("1/r1-1")) == AWKWARD  # branches resolve by their short name


def test_export_branch_carries_the_record_and_benchmark_md_on_top_of_head(user_repo):
    v = Versions.open(user_repo / "ops" / "softmax", "softmax", "kernel/baseline.py")
    v.commit_baseline(1, b"BLOCK = 1024\n")
    best = v.commit_variant(1, 3, 2, b"BLOCK = 2048\n", "wider")
    v.set_best(best.commit)
    before = user_state(user_repo)
    msg = (
        "kernelloop: softmax best kernel, 1.310x over baseline\n\nbody\n\n"
        "Kernelloop-Objective: 1.3100\n"
    )
    out = v.export(v.best(), "# Benchmark record: softmax\n", msg)
    assert user_state(user_repo) == before
    assert out.branch == "refs/heads/kernelloop/softmax/export"
    assert (
        git(user_repo, "rev-parse", f"{out.commit}^").strip()
        == git(user_repo, "rev-parse", "HEAD").strip()
    )
    assert (
        git(user_repo, "show", f"{out.commit}:ops/softmax/kernel/baseline.py") == "BLOCK = 2048\n"
    )
    assert git(user_repo, "show", f"{out.commit}:ops/softmax/kernel/BENCHMARK.md").startswith(
        "# Benchmark record"
    )
    trailers = subprocess.run(
        ["git", "interpret-trailers", "--parse"],
        input=git(user_repo, "log", "-1", "--format=%B", out.commit),
        capture_output=True,
        text=True,
    ).stdout
    assert "Kernelloop-Objective: 1.3100" in trailers
    with pytest.raises(VersionsError, match="--branch"):
        v.export(v.best(), "x", msg, branch="bad..name")


def test_unknown_revision_is_a_usage_error_with_the_fix(user_repo):
    v = Versions.open(user_repo, "softmax", "ops/softmax/kernel/baseline.py")
    with pytest.raises(VersionsError, match="kernelloop history"):
        v.resolve("no-such-generation")


def test_task_names_become_valid_ref_components():
    assert ref_component("a..b") == "a_b"
    assert ref_component(".hidden") == "hidden"
    assert ref_component("x.lock") == "x.lock_"
    for name in ("a..b", ".hidden", "x.lock", "ln_softmax_dropout"):
        ok = subprocess.run(
            ["git", "check-ref-format", f"refs/heads/kernelloop/{ref_component(name)}/best"]
        )
        assert ok.returncode == 0
