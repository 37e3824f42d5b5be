"""What an external agent reads of its session (a part of session.ExternalSession): the
task as it needs it to write a candidate (the same contract the loop's agents read), the
history digest, any recorded variant's source, and where the best and the run stand."""

from __future__ import annotations

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.run import select_shapes
from kernelloop.history.models import history_row
from kernelloop.loop.context import task_contract
from kernelloop.loop.screening import entry_signature
from kernelloop.policy import rules_text


class SessionViews:
    def describe(self) -> dict:
        """The task as an agent needs it to write a candidate, and where the run stands."""
        t, rules = self.task, self.task.spec.rules
        shapes = select_shapes(t, self.device, self.opts.shapes)
        baseline = t.baseline_path.read_text()
        contract = task_contract(t, self.device, self.best, self.opts.shapes, self.opts.dtypes)
        return {
            # The same contract the loop's LLM agents read (task/contract.py): reference,
            # input cases, shapes with weights and floors, tolerances, randomness checks,
            # roofline, the best's per-shape numbers, and where candidates are judged.
            "contract": contract.text(),
            "task": t.name,
            "description": t.spec.task.description,
            "language": t.spec.task.language,
            "entry": t.spec.task.entry,
            "entry_signature": entry_signature(baseline, t.spec.task.entry),
            "params": dict(t.spec.params),
            "device": self.device,
            "timings_count": self.measured,
            "shapes": [{"shape": s.label, "weight": s.weight, "tag": s.tag} for s in shapes],
            "dtypes": self.opts.dtypes or list(t.spec.dtypes),
            "tolerances": {k: v.model_dump() for k, v in t.spec.tolerances.items()},
            "tunables": list(t.spec.task.tunables),
            "rules": rules_text(rules, t.spec.task.entry),
            "baseline_source": baseline,
            "best": self._best_dict(source=True),
            "run": self._run_dict(),
        }

    def history(self, limit: int = 20) -> dict:
        """The digest the loop's agents get each round, and the latest history rows."""
        with self._memory(write=False) as run:
            attempts = run.store.attempts(self.task.name)
            return {
                "digest": run.store.digest(self.task.name),
                "attempts": [history_row(a) for a in attempts[-limit:]],
            }

    def variant(self, ref: str) -> dict:
        """The source of any recorded generation: a proposal id, 'best', or a git revision."""
        with self._memory(write=False) as run:
            attempt = None
            if ref.isdigit():
                attempt = run.store.attempt(int(ref))
                if not attempt.commit_sha:
                    raise KernelloopError(
                        f"proposal #{ref} was never committed (refused or in "
                        "flight); pick an id with a commit from the history tool."
                    )
                commit = run.versions.resolve(attempt.commit_sha)
            else:
                commit = run.versions.resolve(ref)
            out = {"ref": ref, "commit": commit, "source": run.versions.read(commit).decode()}
            if attempt is not None:
                out["attempt"] = history_row(attempt)
            return out

    # ---- views -----------------------------------------------------------------------
    def _best_dict(self, source: bool = False) -> dict:
        b = self.best
        if b is None:
            return {
                "id": None,
                "what": "the baseline (the run starts, and the baseline is "
                "evaluated as round 0, on the first submit_candidate or profile call)",
            }
        out = {
            "id": b.pid,
            "objective_vs_baseline": b.objective,
            "pct_of_floor": b.pct_of_floor,
            "per_shape": b.shapes,
        }
        if source:
            out["source"] = b.source
        return out

    def _run_dict(self) -> dict:
        status = self.status or ("running" if self.run_id else "not started")
        return {
            "run_id": self.run_id,
            "rounds_used": self.round,
            "rounds_left": max(0, self.last_round - self.round),
            "profiles_left": self.profiles.left,
            "status": status,
            "reason": self.why,
        }
