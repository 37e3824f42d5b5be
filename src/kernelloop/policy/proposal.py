"""Pre-evaluation checks: refuse a proposal before it costs a benchmark."""

from __future__ import annotations

import ast

from kernelloop import pyast
from kernelloop.policy.decisions import PolicyDecision
from kernelloop.policy.edits import DEFAULT_MERGE_GAP, edit_points
from kernelloop.policy.static import count_launches, defines_name, find_function, signature_of
from kernelloop.task.spec import Rules


def check_proposal(
    rules: Rules,
    parent_source: str,
    candidate_source: str,
    entry: str,
    parent_launch_sites: int | None = None,
) -> list[PolicyDecision]:
    """Every pre-evaluation rule's decision for one candidate, allowed ones included.

    The candidate may be evaluated only if no decision refuses it (`refusals(...)` is
    empty). `parent_launch_sites` overrides the static count of the parent (e.g. with
    the count of the baseline the loop already holds).
    """
    try:
        tree = pyast.parse(candidate_source)
    except SyntaxError as e:
        # Nothing else can be checked, and the sandbox would only report the same.
        return [
            PolicyDecision(
                False,
                "parse",
                f"the candidate is not valid Python (line {e.lineno}: {e.msg}); send a complete "
                "source file.",
            )
        ]
    decisions = [
        check_edit_points(rules, parent_source, candidate_source),
        _check_entry(tree, entry),
    ]
    try:
        parent_tree = pyast.parse(parent_source)
    except SyntaxError:
        # A parent is a source that was evaluated; one that does not parse (hand-edited
        # history) leaves nothing to compare the locks against, so the evaluation decides.
        parent_tree = ast.Module(body=[], type_ignores=[])
    if rules.interface_lock:
        decisions.append(_check_interface(parent_tree, tree, entry))
    if not rules.allow_fusion_change:
        decisions.append(_check_static_launches(parent_tree, tree, entry, parent_launch_sites))
    return decisions


def check_edit_points(rules: Rules, parent_source: str, candidate_source: str) -> PolicyDecision:
    # The merge distance is a task rule once spec.Rules has `edit_merge_gap`; until then 3.
    gap = getattr(rules, "edit_merge_gap", DEFAULT_MERGE_GAP)
    points = edit_points(parent_source, candidate_source, merge_gap=gap)
    where = "; ".join(p.describe() for p in points)
    if not points:
        return PolicyDecision(
            False,
            "no_change",
            "the candidate makes no code change to its parent (comments, blank lines and "
            "docstrings do not count); change the code.",
        )
    if len(points) > rules.max_edit_points:
        return PolicyDecision(
            False,
            "edit_points",
            f"the candidate has {len(points)} edit points ({where}) but at most "
            f"{rules.max_edit_points} are allowed per proposal; split it into smaller proposals.",
        )
    return PolicyDecision(
        True,
        "edit_points",
        f"{len(points)} edit point(s) of {rules.max_edit_points} allowed ({where}).",
    )


def _check_entry(tree: ast.Module, entry: str) -> PolicyDecision:
    if find_function(tree, entry) is not None or defines_name(tree, entry):
        return PolicyDecision(True, "entry", f"the candidate defines `{entry}`.")
    return PolicyDecision(
        False,
        "entry",
        f"the candidate does not define the entry function `{entry}`; define `def {entry}(...)` at "
        "module level.",
    )


def _check_interface(parent: ast.Module, candidate: ast.Module, entry: str) -> PolicyDecision:
    parent_fn, cand_fn = find_function(parent, entry), find_function(candidate, entry)
    if parent_fn is None:
        return PolicyDecision(
            True,
            "interface_lock",
            f"the parent has no `def {entry}` to compare against; left to the evaluation's "
            "interface suite.",
        )
    if cand_fn is None:
        return PolicyDecision(
            False,
            "interface_lock",
            f"the candidate binds `{entry}` without a `def`, so its signature cannot be verified; "
            f"define `def {entry}` with the parent's signature.",
        )
    before, after = signature_of(parent_fn), signature_of(cand_fn)
    if before != after:
        return PolicyDecision(
            False,
            "interface_lock",
            f"the interface lock forbids changing `{entry}{before.render()}` to "
            f"`{entry}{after.render()}`; keep the parent's parameters, order, kinds and defaults.",
        )
    return PolicyDecision(True, "interface_lock", f"`{entry}{after.render()}` is unchanged.")


def _check_static_launches(
    parent: ast.Module, candidate: ast.Module, entry: str, parent_sites: int | None
) -> PolicyDecision:
    before, after = count_launches(parent, entry), count_launches(candidate, entry)
    if after is None or (before is None and parent_sites is None):
        return PolicyDecision(
            True,
            "fusion_lock",
            "launch sites could not be counted statically; left to the measured launch count.",
        )
    n_before = parent_sites if parent_sites is not None else before.total  # type: ignore[union-attr]
    if after.total != n_before:
        return PolicyDecision(
            False,
            "fusion_lock",
            f"the fusion lock forbids changing the number of kernel launches per call: `{entry}` "
            f"reaches {n_before} launch site(s) in the parent and {after.total} in the candidate "
            f"({after.describe()}); keep the kernel structure, or set "
            "rules.allow_fusion_change = true in task.toml.",
        )
    return PolicyDecision(
        True, "fusion_lock", f"`{entry}` still reaches {after.total} launch site(s)."
    )


def check_launch_count(
    rules: Rules, parent_launches: int | None, candidate_launches: int | None
) -> PolicyDecision:
    """The fusion lock on measured launches per call (EvaluationRecord.kernel_launches_per_call)."""
    if rules.allow_fusion_change:
        return PolicyDecision(
            True, "fusion_lock", "the task allows changing the number of kernel launches."
        )
    if parent_launches is None or candidate_launches is None:
        return PolicyDecision(
            True,
            "fusion_lock",
            "launches per call were not measured for both parent and candidate; nothing to "
            "compare.",
        )
    if parent_launches != candidate_launches:
        return PolicyDecision(
            False,
            "fusion_lock",
            "the fusion lock forbids changing the number of kernel launches per call, measured "
            f"{parent_launches} for the parent and {candidate_launches} for the candidate; keep "
            "the kernel structure, or set rules.allow_fusion_change = true in task.toml.",
        )
    return PolicyDecision(
        True, "fusion_lock", f"{candidate_launches} kernel launch(es) per call, as in the parent."
    )
