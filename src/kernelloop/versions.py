"""Every variant a git commit, written with plumbing so the user's checkout never churns.

Blobs, trees and commits are written with `hash-object`, a throw-away index
(`GIT_INDEX_FILE`), `write-tree`, `commit-tree` and `update-ref`: the user's HEAD, index
and working tree are untouched (rollback writes the one kernel file it was asked to).
Variants live on `kernelloop/<task>/<run>/r<round>-<k>` branches made from the current
best; `kernelloop/<task>/best` marks the best. Kernel bytes go through `--no-filters`
so autocrlf or clean filters can never alter what is stored or restored.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kernelloop.errors import KernelloopError

_FALLBACK_IDENT = {
    "GIT_AUTHOR_NAME": "kernelloop",
    "GIT_AUTHOR_EMAIL": "kernelloop@localhost",
    "GIT_COMMITTER_NAME": "kernelloop",
    "GIT_COMMITTER_EMAIL": "kernelloop@localhost",
}


class VersionsError(KernelloopError):
    """A git operation on the variant history failed."""


@dataclass(frozen=True)
class Variant:
    commit: str
    branch: str  # full ref name, e.g. refs/heads/kernelloop/softmax/3/r2-1


def ref_component(name: str) -> str:
    """A task name made safe as one ref path component (git check-ref-format rules)."""
    name = re.sub(r"\.\.+", "_", name).lstrip(".")
    if name.endswith(".lock") or name.endswith("."):
        name = name + "_"
    return name or "task"


class Versions:
    """The variant history of one task's kernel file inside a git repository."""

    def __init__(self, repo: Path, task_name: str, kernel_path: str, task_prefix: str) -> None:
        self.repo = repo
        self.task = ref_component(task_name)
        self.kernel_path = kernel_path  # posix path relative to the repository root
        self.task_prefix = task_prefix  # the task folder, relative to the repository root
        self._env = self._identity_env()

    @classmethod
    def open(cls, task_folder: str | Path, task_name: str, kernel_file: str | Path) -> Versions:
        """Use the repository the task folder sits in, or initialize one in the task folder."""
        folder = Path(task_folder).resolve()
        probe = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel", "--show-prefix"],
            capture_output=True,
            text=True,
        )
        if probe.returncode != 0:
            init = subprocess.run(
                ["git", "init", "-q", str(folder)], capture_output=True, text=True
            )
            if init.returncode != 0:
                raise VersionsError(
                    f"{folder}: not in a git repository and `git init` failed "
                    f"({init.stderr.strip()}); make the folder writable or create a repository "
                    "there."
                )
            repo, prefix = folder, ""
        else:
            top, prefix = (probe.stdout.splitlines() + [""])[:2]
            repo = Path(top)
        kernel = Path(kernel_file)
        rel = kernel.resolve().relative_to(folder) if kernel.is_absolute() else kernel
        return cls(repo, task_name, f"{prefix}{rel.as_posix()}", prefix.rstrip("/"))

    # ---- low level ---------------------------------------------------------------------

    def _identity_env(self) -> dict[str, str]:
        env = dict(os.environ)
        ok = (
            subprocess.run(
                ["git", "-C", str(self.repo), "var", "GIT_COMMITTER_IDENT"], capture_output=True
            ).returncode
            == 0
        )
        if not ok:  # no user.name/email configured: commit as kernelloop rather than fail
            env.update(_FALLBACK_IDENT)
        return env

    def _git(
        self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None
    ) -> bytes:
        proc = subprocess.run(
            ["git", "-C", str(self.repo), *args],
            input=input,
            capture_output=True,
            env=env or self._env,
        )
        if proc.returncode != 0:
            raise VersionsError(
                f"git {args[0]} failed in {self.repo}: "
                f"{proc.stderr.decode(errors='replace').strip()}; check the repository (e.g. `git "
                "fsck`) and retry."
            )
        return proc.stdout

    def _rev(self, rev: str) -> str | None:
        out = subprocess.run(
            ["git", "-C", str(self.repo), "rev-parse", "-q", "--verify", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() if out.returncode == 0 else None

    def hash_blob(self, data: bytes) -> str:
        return (
            self._git("hash-object", "-w", "--no-filters", "--stdin", input=data).decode().strip()
        )

    def _tree(self, base: str | None, files: dict[str, bytes]) -> str:
        """A tree: `base`'s tree with `files` (path -> bytes) added or replaced."""
        with tempfile.TemporaryDirectory(prefix="kl-index-") as tmp:
            env = {**self._env, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if base:
                self._git("read-tree", base, env=env)
            else:
                self._git("read-tree", "--empty", env=env)
            for path, data in files.items():
                mode = self._mode(base, path)
                blob = self.hash_blob(data)
                self._git("update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
            return self._git("write-tree", env=env).decode().strip()

    def _mode(self, base: str | None, path: str) -> str:
        if base:
            out = self._git("ls-tree", base, "--", path).decode().split()
            if out and out[0] in ("100644", "100755"):
                return out[0]  # keep an executable bit the user set
        return "100644"

    def _commit(self, tree: str, parents: list[str], message: str) -> str:
        args = ["commit-tree", tree]
        for p in parents:
            args += ["-p", p]
        return self._git(*args, input=message.encode()).decode().strip()

    def _set_ref(self, ref: str, commit: str, reason: str) -> None:
        self._git("update-ref", "-m", f"kernelloop: {reason}", ref, commit)

    def _branch(self, name: str) -> str:
        return f"refs/heads/kernelloop/{self.task}/{name}"

    # ---- the variant history -----------------------------------------------------------

    def base_commit(self) -> str:
        """What variants ultimately descend from: the user's HEAD, or (in a repository
        with no commits) a snapshot of the task folder made once and kept under a ref."""
        head = self._rev("HEAD")
        if head:
            return head
        root_ref = f"refs/kernelloop/{self.task}/root"
        root = self._rev(root_ref)
        if root:
            return root
        listed = self._git(
            "ls-files",
            "-z",
            "--others",
            "--cached",
            "--exclude-standard",
            "--",
            self.task_prefix or ".",
        ).decode()
        files = {}
        for path in filter(None, listed.split("\0")):
            full = self.repo / path
            if full.is_file() and full.stat().st_size < 1_000_000 and "__pycache__" not in path:
                files[path] = full.read_bytes()
        root = self._commit(
            self._tree(None, files), [], f"kernelloop: snapshot of task {self.task}\n"
        )
        self._set_ref(root_ref, root, "task snapshot")
        return root

    def best(self) -> str | None:
        return self._rev(self._branch("best"))

    def set_best(self, commit: str, reason: str = "new best") -> None:
        self._set_ref(self._branch("best"), commit, reason)

    def commit_source(
        self, name: str, source: str | bytes, message: str, parent: str | None = None
    ) -> Variant:
        """Commit `source` as the kernel file on branch kernelloop/<task>/<name>."""
        data = source.encode() if isinstance(source, str) else source
        parent = parent or self.best() or self.base_commit()
        commit = self._commit(self._tree(parent, {self.kernel_path: data}), [parent], message)
        ref = self._branch(name)
        self._set_ref(ref, commit, name)
        return Variant(commit, ref)

    def commit_baseline(self, run_id: int, source: str | bytes) -> Variant:
        """Generation 0 of a run; it becomes the best if the task has none yet."""
        v = self.commit_source(
            f"{run_id}/r0-baseline",
            source,
            f"kernelloop {self.task} run {run_id}: baseline\n",
            parent=self.best() or self.base_commit(),
        )
        if self.best() is None:
            self.set_best(v.commit, "baseline")
        return v

    def commit_variant(
        self,
        run_id: int,
        round_index: int,
        k: int,
        source: str | bytes,
        hypothesis: str,
        proposal_id: int | None = None,
        parent: str | None = None,
    ) -> Variant:
        """A proposal's source, on its own branch made from `parent` (default: the best)."""
        title = " ".join(hypothesis.split())[:72] or "candidate"
        msg = f"kernelloop {self.task} r{round_index}-{k}: {title}\n\n{hypothesis.strip()}\n"
        if proposal_id is not None:
            msg += f"\nKernelloop-Run: {run_id}\nKernelloop-Proposal: {proposal_id}\n"
        return self.commit_source(f"{run_id}/r{round_index}-{k}", source, msg, parent=parent)

    def resolve(self, rev: str) -> str:
        commit = self._rev(rev) or self._rev(self._branch(rev))
        if commit is None:
            raise VersionsError(
                f"{rev!r} names no commit in {self.repo}; pass a proposal id from `kernelloop "
                "history` or a commit/branch from `git branch --list 'kernelloop/*'`."
            )
        return commit

    def read(self, commit: str) -> bytes:
        """The kernel file's exact bytes at `commit`."""
        return self._git("cat-file", "blob", f"{commit}:{self.kernel_path}")

    def restore(self, commit: str, dest: str | Path) -> str | None:
        """Write the kernel bytes of `commit` to `dest`, byte for byte.

        What `dest` held before is committed on a backup branch first (unless it already
        equals the target), so a rollback never loses the user's kernel; returns that branch.
        """
        dest = Path(dest)
        data = self.read(commit)
        backup = None
        if dest.exists() and dest.read_bytes() != data:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            backup = self.commit_source(
                f"backup/{stamp}",
                dest.read_bytes(),
                f"kernelloop {self.task}: kernel file before rollback to {commit[:12]}\n",
            ).branch
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.kernelloop-tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dest)  # atomic: a crash leaves the old or the new kernel, never half
        return backup

    def export(
        self, commit: str, benchmark_md: str, message: str, branch: str | None = None
    ) -> Variant:
        """A reviewable commit on top of the user's HEAD: the kernel from `commit` plus
        BENCHMARK.md beside it, with the benchmark record in the commit message."""
        ref = f"refs/heads/{branch}" if branch else self._branch("export")
        if subprocess.run(["git", "check-ref-format", ref], capture_output=True).returncode != 0:
            raise VersionsError(
                f"{branch!r} is not a valid branch name; pick another with --branch."
            )
        parent = self.base_commit()
        md_path = str(Path(self.kernel_path).parent / "BENCHMARK.md").removeprefix("./")
        files = {self.kernel_path: self.read(commit), md_path: benchmark_md.encode()}
        new = self._commit(self._tree(parent, files), [parent], message)
        self._set_ref(ref, new, "export")
        return Variant(new, ref)
