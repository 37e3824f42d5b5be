"""Every KernelBench problem of a folder imported and its baseline evaluated on the CPU
(issue 14: "the maintainers import further KernelBench problems ... must import and their
baselines evaluate without edits"). A benchmark, not a test: one row per problem with the
import's and the evaluation's verdict, reason and seconds.

    python benchmarks/kernelbench_survey.py KERNELBENCH_DIR OUT_DIR [--timeout 150]
        [--levels 1,2,3] [--limit N]

Each problem runs in its own `kernelloop` process (import, then `evaluate BASELINE
--device cpu --no-timing`), so one that hangs or crashes costs only its row. Writes
OUT_DIR/kernelbench-survey-<UTC time>.json and .md (machine, versions, commit, rows).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src")]
from kernelloop.task.kernelbench import task_name  # noqa: E402


def _run(args: list[str], timeout: float) -> tuple[int | None, str, float]:
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "kernelloop.cli", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "COLUMNS": "1000"},
        )
        return p.returncode, p.stdout + p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else ""
        return None, out, time.monotonic() - t0


def _verdict(text: str) -> str:
    for line in text.splitlines():
        if line.startswith(("ACCEPTED", "REJECTED")):
            return line.strip()
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--timeout", type=float, default=150.0)
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    files = [
        f
        for lv in a.levels.split(",")
        for f in sorted(
            (a.kernelbench / f"level{lv}").glob("*.py"),
            key=lambda p: int(re.match(r"\d+", p.name).group()) if re.match(r"\d+", p.name) else 0,
        )
    ]
    if a.limit:
        files = files[: a.limit]
    rows = []
    work = Path(tempfile.mkdtemp(prefix="kb-survey-"))
    for k, f in enumerate(files, 1):
        level = f.parent.name
        rc, out, s_imp = _run(["import", "kernelbench", str(f), "--out", str(work)], 300)
        row = {"problem": f"{level}/{f.name}", "import_s": round(s_imp, 1)}
        said = " ".join(ln.split("warning:", 1)[1].strip() for ln in out.splitlines()
                        if "warning:" in ln)  # fmt: skip
        if said:
            row["import_warning"] = said[:300]
        folder = work / task_name(f)
        if rc != 0 or not folder.is_dir():
            row.update(imported=False, verdict="", reason=_verdict(out)[:300])
        else:
            rc, out, s_ev = _run(
                ["evaluate", str(folder), str(folder / "baseline.py"), "--device", "cpu",
                 "--no-timing"],
                a.timeout,
            )  # fmt: skip
            v = _verdict(out)
            row.update(
                imported=True,
                evaluate_s=round(s_ev, 1),
                verdict="timeout" if rc is None else ("accepted" if v.startswith("ACCEPTED")
                                                      else "rejected"),
                reason="" if v.startswith("ACCEPTED") else v[:300],
            )  # fmt: skip
        rows.append(row)
        print(f"[{k}/{len(files)}] {row['problem']}: "
              f"{'import failed' if not row['imported'] else row['verdict']} "
              f"{row.get('reason', '')[:120]}", flush=True)  # fmt: skip
    import torch

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    when = dt.datetime.now(dt.UTC)
    meta = {
        "date": when.isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "commit": commit,
        "kernelbench": str(a.kernelbench),
        "timeout_s": a.timeout,
    }
    counts = {
        "problems": len(rows),
        "imported": sum(r["imported"] for r in rows),
        "accepted": sum(r.get("verdict") == "accepted" for r in rows),
        "rejected": sum(r.get("verdict") == "rejected" for r in rows),
        "timeout": sum(r.get("verdict") == "timeout" for r in rows),
    }
    a.out.mkdir(parents=True, exist_ok=True)
    stem = a.out / f"kernelbench-survey-{when:%Y-%m-%dT%H%M%S}"
    stem.with_suffix(".json").write_text(
        json.dumps({**meta, "counts": counts, "rows": rows}, indent=1) + "\n"
    )
    md = [
        f"# KernelBench baselines on the CPU ({meta['date']})",
        "",
        ", ".join(f"{k} {v}" for k, v in meta.items()),
        "",
        ", ".join(f"{k}: {v}" for k, v in counts.items()),
        "",
        "| problem | import s | evaluate s | verdict | reason |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = r.get("verdict") or "import failed"
        reason = r.get("reason", "").replace("|", "/")
        if r.get("import_warning"):
            reason = f"{reason} (import: {r['import_warning']})".replace("|", "/").strip()
        md.append(
            f"| {r['problem']} | {r['import_s']} | {r.get('evaluate_s', '')} | {verdict} | "
            f"{reason} |"
        )
    stem.with_suffix(".md").write_text("\n".join(md) + "\n")
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
