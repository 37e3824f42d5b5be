"""Optimization history: SQLite store, the digest fed back to agents, duplicate detection."""

from kernelloop.history.digest import approx_tokens, render_digest
from kernelloop.history.duplicates import DuplicateFinding, PriorProposal, find_duplicate
from kernelloop.history.fingerprint import changed_lines, fingerprint, normalize_source
from kernelloop.history.models import Approval, Attempt, RunInfo, RunState
from kernelloop.history.store import HistoryStore
from kernelloop.history.workspace import history_path, open_task_memory, workspace_dir

__all__ = [
    "Approval",
    "Attempt",
    "DuplicateFinding",
    "HistoryStore",
    "PriorProposal",
    "RunInfo",
    "RunState",
    "approx_tokens",
    "changed_lines",
    "find_duplicate",
    "fingerprint",
    "history_path",
    "normalize_source",
    "open_task_memory",
    "render_digest",
    "workspace_dir",
]
