"""Live or crashed: what the history can say about a run still marked `running`.

A run's owner (the `kernelloop run` or `kernelloop mcp` process) records its pid and host
when it takes the run and refreshes a heartbeat every BEAT_EVERY_S seconds from a thread
of its own, so a long evaluation does not make it look dead. It lets go of the run (owner
cleared) when it finishes, stops, or fails with an error it can see. The rule:

- no owner (finished, let go, or written by a kernelloop from before owners): not live;
- owner on this host: live while its pid exists (a zombie does not count) and the
  heartbeat is younger than STALE_AFTER_S; a dead pid is a crash at once, with no wait;
  a living pid with a stale heartbeat is a reused pid (or a stopped process) and is
  treated as crashed;
- owner on another host (a workspace on a shared disk): live while the heartbeat is
  younger than STALE_AFTER_S.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kernelloop.history.models import RunInfo, RunOwner, RunState

BEAT_EVERY_S = 5.0
STALE_AFTER_S = 60.0


@dataclass(frozen=True)
class Liveness:
    live: bool
    why: str  # one clause, for a message: "pid 123 on box is alive, heartbeat 3 s ago"


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def heartbeat_age_s(owner: RunOwner, now: datetime | None = None) -> float:
    try:
        beat = datetime.fromisoformat(owner.heartbeat_at)
    except ValueError:
        return float("inf")
    return ((now or datetime.now(UTC)) - beat).total_seconds()


def liveness(run: RunInfo | RunState, *, now: datetime | None = None) -> Liveness:
    """Whether the process that holds `run` is still running it (see the module's rule)."""
    owner = run.owner
    if owner is None:
        return Liveness(False, "no process holds it")
    age = heartbeat_age_s(owner, now)
    where = f"pid {owner.pid} on {owner.host or 'an unknown host'}"
    if owner.host == this_host() and not pid_alive(owner.pid):
        return Liveness(False, f"{where} is gone")
    if age > STALE_AFTER_S:
        return Liveness(False, f"{where} sent no heartbeat for {age:.0f} s")
    return Liveness(True, f"{where} is running it (heartbeat {max(age, 0):.0f} s ago)")
