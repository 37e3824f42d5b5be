"""The report against the records of a real measured CPU run: its numbers are the stored
ones, its chart has one point per proposal, its checklist follows the records."""

import json
import re
from pathlib import Path

from kernelloop.history import HistoryStore
from kernelloop.report import write_report
from kernelloop.task import load_task


def _build(folder: Path, out: Path, store: HistoryStore | None = None) -> tuple[str, str]:
    task = load_task(folder)
    own = store is None
    store = store or HistoryStore.open(folder / ".kernelloop" / "history.sqlite")
    try:
        files = write_report(store, task.name, task.spec.rules, out)
    finally:
        if own:
            store.close()
    return files.markdown.read_text(), files.html.read_text()


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _table(md: str, title: str) -> list[list[str]]:
    lines = [ln for ln in _section(md, title).splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines[1:]]  # skip the header


def _checklist(md: str) -> dict[str, tuple[str, str]]:
    out = {}
    for m in re.finditer(
        r"^- \[[ x]\] \*\*(pass|fail|n/a)\*\* (.+?): (.*)$", _section(md, "Review checklist"), re.M
    ):
        out[m.group(2)] = (m.group(1), m.group(3))
    return out


def _item(md: str, start: str) -> tuple[str, str]:
    return next(v for k, v in _checklist(md).items() if k.startswith(start))


def _best(store: HistoryStore, summary: dict) -> tuple[int, dict, dict]:
    pid = summary["best_proposal_id"]
    return pid, json.loads(store.bench_json(pid)), json.loads(store.gate_json(pid))


def test_per_shape_and_claims_are_the_stored_numbers(measured_run, run_copy, tmp_path):
    folder, store = run_copy
    md, html = _build(folder, tmp_path / "out", store)
    pid, bench, gate = _best(store, measured_run[1])
    assert f"## Per shape (the best, #{pid})" in md
    speedups = {g["shape"]: g["speedup_vs_baseline"] for g in gate["shapes"]}
    expected = [
        [
            s["shape"],
            s["dtype"],
            s["tag"],
            f"{s['weight']:g}",
            f"{s['impls']['candidate']['median_ms']:.4f}",
            f"{s['impls']['baseline']['median_ms']:.4f}",
            f"{speedups[s['shape']]:.3f}x",
            "–",
            "–",
            "–",  # the bound: no floor on a CPU
        ]
        for s in bench["shapes"]
    ]
    assert _table(md, "Per shape") == expected
    assert {r[0] for r in expected} == {"512x512", "2048x16"}
    num = ' class="num"'
    for row in expected:  # the HTML table carries the same cells
        cells = (f"<td{num if 2 < i < 9 else ''}>{c}</td>" for i, c in enumerate(row))
        assert "".join(cells) in html
    # Each variant: the agent's claim next to what was measured and the verdict with reasons.
    rows = {int(r[0]): r for r in _table(md, "Claims against measurements")}
    attempts = {a.id: a for a in store.attempts("cpu_rmsnorm_residual") if a.round > 0}
    assert set(rows) == set(attempts)
    for a in attempts.values():
        claim, measured, verdict, reasons = (
            rows[a.id][3],
            rows[a.id][5],
            rows[a.id][7],
            rows[a.id][8],
        )
        assert claim == a.hypothesis
        if a.status == "refused":
            assert (
                verdict == "refused"
                and "not evaluated" in measured
                and reasons.startswith(a.refused_reason[:40])
            )
        else:
            assert measured.startswith(f"{a.objective:.3f}x over baseline")
            assert verdict.startswith(a.outcome) and "accept" not in verdict
            assert a.reasons[0][:40] in reasons
    assert "★ best" in rows[pid][7]


def test_chart_has_one_point_per_proposal(measured_run, run_copy, tmp_path):
    folder, store = run_copy
    out = tmp_path / "out"
    md, html = _build(folder, out, store)
    attempts = store.attempts("cpu_rmsnorm_residual", run_id=measured_run[1]["run_id"])
    states = {
        a.id: (
            "refused"
            if a.status == "refused"
            else "baseline"
            if a.round == 0
            else "promoted"
            if a.was_best
            else "correct"
            if a.accepted
            else "rejected"
        )
        for a in attempts
    }
    assert sorted(states.values()) == ["baseline", "promoted", "refused", "rejected"]
    assert sorted(int(x) for x in re.findall(r'<g id="point-(\d+)"', html)) == sorted(states)
    for pid in states:  # each group draws its marker
        group = html.split(f'<g id="point-{pid}"', 1)[1].split("</g>", 1)[0]
        assert "<use " in group or "<path " in group, group[:300]
    listed = {int(r[0].lstrip("#")): (r[2], r[3]) for r in _table(md, "Speed per round")}
    by_id = {a.id: a for a in attempts}
    # the table says which check rejected ("rejected [slower]": one vocabulary, issue 47)
    assert {k: v[0].split(" [")[0] for k, v in listed.items()} == states
    assert all(v[0] != "rejected" for v in listed.values()), listed
    for pid, (_, speed) in listed.items():
        obj = by_id[pid].objective
        assert speed == ("–" if obj is None else f"{obj:.3f}x")
    assert (out / "progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![speedup over the baseline per round](progress.png)" in md


def test_html_is_self_contained(run_copy, tmp_path):
    folder, store = run_copy
    _, html = _build(folder, tmp_path / "out", store)
    assert (
        html.count("<svg") == 1
    )  # the progress chart, inline (no floor on a CPU: no roofline chart)
    assert "://" not in html
    assert not re.search(r"<(script|link|img|iframe|object)\b", html)
    assert not re.search(r"\bsrc\s*=", html) and "@import" not in html
    # The only references are to the page itself (markers, clip paths of the inline SVG).
    assert all(u.startswith("#") for u in re.findall(r"url\(([^)]*)\)", html))
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', html))


def test_checklist_follows_the_records(measured_run, run_copy, tmp_path):
    """A CPU run's best awaits sign-off (no approval on arch 'cpu'): failed until approved.
    A long-tail shape the records show below the floor fails its item."""
    folder, store = run_copy
    pid, _, gate = _best(store, measured_run[1])
    assert store.pending_best("cpu_rmsnorm_residual").id == pid
    md, _ = _build(folder, tmp_path / "a", store)
    assert _item(md, "No human sign-off") == (
        "fail",
        f"#{pid} awaits sign-off: review it, then run `kernelloop approve TASK`",
    )
    assert _item(md, "Every correctness suite")[0] == "pass"
    state, evidence = _item(md, "The best passed the task's end-to-end model check")
    assert state == "pass" and evidence.startswith("64x64 float32 passed (max abs err ")
    assert _item(md, "No long-tail shape")[0] == "pass"
    assert _item(md, "A second, independent timer")[0] == "n/a"  # no profiler timer on a CPU
    assert "awaiting sign-off" in md.split("## Review checklist")[0]

    store.add_approval("cpu_rmsnorm_residual", "cpu", "reviewer", pid, "looked at the numbers")
    tail = next(g for g in gate["shapes"] if g["tag"] == "long_tail")
    tail["speedup_vs_baseline"] = 0.5
    with store._conn:  # what a history with a long-tail regression holds
        store._conn.execute(
            "UPDATE evaluations SET gate_json = ? WHERE proposal_id = ?", (json.dumps(gate), pid)
        )
    md, _ = _build(folder, tmp_path / "b", store)
    assert _item(md, "No human sign-off") == ("pass", f"approved: #{pid} by reviewer on cpu")
    assert _item(md, "No long-tail shape") == ("fail", f"{tail['shape']} 0.500x")
    assert _item(md, "No shape slower than the baseline")[0] == "fail"
    assert "awaiting sign-off" not in md.split("## Review checklist")[0]


def test_absent_cost_data_is_reported_as_absent_and_present_data_summed(
    measured_run, run_copy, tmp_path
):
    folder, store = run_copy
    md, _ = _build(folder, tmp_path / "a", store)
    ledger = _section(md, "Cost ledger")
    assert "Model spend: no model calls are recorded for this run (agent scripted)." in ledger
    assert "| model |" not in ledger
    summary = measured_run[1]
    assert (
        f"Wall time of the run: {summary['wall_s']:.0f} s." in ledger
    )  # the loop's clock, baseline included

    run = summary["run_id"]
    calls = [
        ("cheap", 1, 1000, 200, 0.002),
        ("cheap", 2, 1500, 300, 0.003),
        ("strong", 2, 4000, 900, 0.05),
    ]
    for model, rnd, i, o, usd in calls:
        store.add_model_call(run, rnd, model, "openai", i, o, usd, 1.5)
    md, _ = _build(folder, tmp_path / "b", store)
    models = {
        r[0]: r for r in _table(md, "Cost ledger") if r[0] in {"cheap", "strong", "**run total**"}
    }
    assert models["cheap"][1:5] == ["2", "2500", "500", "0.0050"]
    assert models["strong"][1:5] == ["1", "4000", "900", "0.0500"]
    assert models["**run total**"][1:5] == ["3", "6500", "1400", "0.0550"]
    rounds = [r for r in _table(md, "Cost ledger") if r[0] in {"1", "2"}]
    assert rounds == [["1", "1", "1000", "200", "0.0020"], ["2", "2", "5500", "1200", "0.0530"]]


def test_roofline_and_metric_deltas_from_stored_profiles(measured_run, run_copy, tmp_path):
    """A CPU record has no floor and no counters; with floors and an Nsight Compute delta
    in the records (as a GPU run stores them), both show, and the L2 drop is flagged."""
    folder, store = run_copy
    md, _ = _build(folder, tmp_path / "a", store)
    assert "No roofline floor is recorded for this device" in _section(md, "Roofline position")
    assert _item(md, "No secondary metric")[0] == "n/a"

    pid, bench, _ = _best(store, measured_run[1])
    for i, s in enumerate(bench["shapes"]):
        s["floor_ms"] = 0.01 * (i + 1)
        s["impls"]["candidate"]["pct_of_floor"] = 40.0 + i
        s["impls"]["baseline"]["pct_of_floor"] = 10.0 + i
    with store._conn:
        store._conn.execute(
            "UPDATE evaluations SET bench_json = ? WHERE proposal_id = ?", (json.dumps(bench), pid)
        )
    deltas = [
        {
            "kernel": "rmsnorm",
            "metric": "duration_us",
            "label": "duration",
            "before": 30.0,
            "after": 20.0,
            "unit": "us",
            "regression": False,
        },
        {
            "kernel": "rmsnorm",
            "metric": "l2_hit_pct",
            "label": "L2 hit",
            "before": 86.0,
            "after": 81.0,
            "unit": "%",
            "regression": True,
        },
    ]
    store.add_profile(pid, "summary", {"report": {"source": "ncu", "deltas": deltas}})
    out = tmp_path / "b"
    md, html = _build(folder, out, store)
    cols = [(r[7], r[8]) for r in _table(md, "Per shape")]
    assert cols == [(f"{40.0 + i:.1f}%", f"{10.0 + i:.1f}%") for i in range(len(bench["shapes"]))]
    assert (
        "![% of the roofline floor per shape](roofline.png)" in md
        and (out / "roofline.png").is_file()
    )
    assert 'id="roofline-best"' in html and html.count("<svg") == 2
    rows = _table(md, "Metric deltas against the parent")
    assert ["L2 hit", "86.0%", "81.0%", "**regression**"] == rows[1][3:7]
    assert rows[0][3:7] == ["duration", "30.0 us", "20.0 us", ""]
    assert _item(md, "No secondary metric") == ("fail", "r1-1 L2 hit 86.0% → 81.0%")


def test_the_compiled_slot_shows_where_the_best_was_timed_against_it(
    measured_run, run_copy, tmp_path
):
    """Without the compiled slot the table has no compiled columns; with one in the best's
    record (as `kernelloop run --compiled` stores it), its median and the speedup over
    torch.compile show per shape and overall, beside the speedup over the baseline."""
    folder, store = run_copy
    md, _ = _build(folder, tmp_path / "a", store)
    assert "compiled ms" not in md and "over torch.compile" not in md

    pid, bench, _ = _best(store, measured_run[1])
    for i, s in enumerate(bench["shapes"]):
        compiled = dict(s["impls"]["baseline"], impl="compiled", median_ms=0.5 + i)
        s["impls"]["compiled"] = compiled
        s["speedup_vs_compiled"] = 1.25 + i
    bench["speedup_vs_compiled"] = 1.5
    with store._conn:
        store._conn.execute(
            "UPDATE evaluations SET bench_json = ? WHERE proposal_id = ?", (json.dumps(bench), pid)
        )
    md, html = _build(folder, tmp_path / "b", store)
    rows = {r[0]: r for r in _table(md, "Per shape")}
    for i, s in enumerate(bench["shapes"]):
        assert rows[s["shape"]][7:9] == [f"{0.5 + i:.4f}", f"{1.25 + i:.3f}x"], rows
    assert "| compiled ms | speedup over torch.compile |" in md
    assert "x over the baseline, 1.500x over torch.compile" in md
    assert "<th>compiled ms</th><th>speedup over torch.compile</th>" in html
    assert "1.500x over torch.compile" in html
