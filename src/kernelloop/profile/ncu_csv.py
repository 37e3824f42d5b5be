"""Read Nsight Compute CSV output (details or raw page) into per-kernel raw metrics and rules.

What the CSV looks like (ncu 2023–2025, `--csv --page details --print-details all`):
one row per (kernel launch, section, metric) with the columns "ID", "Kernel Name",
"Block Size", "Grid Size", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
and, on rows that carry a rule result instead of a metric, "Rule Name", "Rule Type"
(OPT/WRN/INF/ERR), "Rule Description", "Estimated Speedup Type" (local/global) and
"Estimated Speedup" (%). Numbers keep thousands separators inside quotes ("1,234.5"),
units may be auto-scaled ("Mbyte", "usecond") unless `--print-units base` was given,
and "n/a" marks a value ncu could not compute. The raw page (`--page raw`) is one row per
kernel with metric names as columns and a units row under the header. Banner lines
(`==PROF==`, `==WARNING==`) and the application's own output may surround the table.

The file is written inside the candidate's sandbox, so it is untrusted text: every field
kept is cleaned and cut (profile/untrusted.py), the number of kernels, metrics and rules
is bounded, and a malformed table raises ValueError only (callers turn it into "missing").
"""

from __future__ import annotations

import csv
import io
import math
import re

from pydantic import BaseModel, Field

from kernelloop.profile.untrusted import clean

_PREFIX = {
    "n": 1e-9,
    "u": 1e-6,
    "µ": 1e-6,
    "m": 1e-3,
    "K": 1e3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
}
_SCALABLE = {
    "second": "second",
    "s": "second",
    "byte": "byte",
    "B": "byte",
    "hz": "hz",
    "Hz": "hz",
    "cycle": "cycle",
    "inst": "inst",
    "sector": "sector",
    "request": "request",
    "warp": "warp",
    "thread": "thread",
    "block": "block",
    "register": "register",
}
_MISSING = {"", "n/a", "N/A", "nan", "NaN", "-", "--"}
# Bounds on what one report may hold (a real H200 report: 5 kernels, ~300 metric rows and
# ~15 rules each); past them the rest is dropped.
MAX_KERNELS = 64
MAX_METRICS = 4000
MAX_RULES = 64


class RawMetric(BaseModel):
    section: str
    name: str
    unit: str = ""
    value: float | None = None
    text: str = ""


class RuleHint(BaseModel):
    """One rule result: ncu's own advice, with the speedup it estimates for fixing it."""

    rule: str
    kind: str = Field(description="OPT, WRN, INF or ERR")
    section: str = ""
    description: str
    speedup_type: str = ""
    est_speedup_pct: float | None = None


class RawKernel(BaseModel):
    """Everything ncu printed for one profiled kernel launch, values in base units."""

    id: int
    name: str
    block: tuple[int, ...] | None = None
    grid: tuple[int, ...] | None = None
    device: str = ""
    cc: str = ""
    metrics: dict[str, RawMetric] = Field(default_factory=dict)
    rules: list[RuleHint] = Field(default_factory=list)

    def get(self, *keys: str, unit_like: str | None = None) -> RawMetric | None:
        """First metric found under any of `keys` (internal names, labels or 'Section/label')."""
        for k in keys:
            m = self.metrics.get(_norm(k))
            if m is not None and m.value is not None and (unit_like is None or unit_like in m.unit):
                return m
        return None

    def value(self, *keys: str, unit_like: str | None = None) -> float | None:
        m = self.get(*keys, unit_like=unit_like)
        return None if m is None else m.value


def _norm(key: str) -> str:
    return re.sub(r"\s+", " ", key.strip()).lower()


def parse_number(text: str) -> float | None:
    """'1,234.5' → 1234.5; 'n/a' → None; text that is not a finite number → None."""
    t = text.strip().replace(",", "").rstrip("%").strip()
    if t in _MISSING or len(t) > 64:
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _scale_word(word: str) -> tuple[float, str] | None:
    if word in _SCALABLE:
        return 1.0, _SCALABLE[word]
    if len(word) > 1 and word[0] in _PREFIX and word[1:] in _SCALABLE:
        return _PREFIX[word[0]], _SCALABLE[word[1:]]
    return None


def to_base_unit(value: float | None, unit: str) -> tuple[float | None, str]:
    """Undo ncu's unit auto-scaling: (2.5, 'usecond') → (2.5e-6, 'second')."""
    u = unit.strip()
    if value is None or not u or u == "%":
        return value, u
    num, _, den = u.partition("/")
    scaled = _scale_word(num)
    if scaled is None:
        return value, u
    factor, base = scaled
    if den:
        d = _scale_word(den)
        if d is None:
            return value * factor, f"{base}/{den}"
        return value * factor / d[0], f"{base}/{d[1]}"
    return value * factor, base


def _dims(text: str) -> tuple[int, ...] | None:
    # "(4,096, 1, 1)": ", " separates dimensions, a bare "," is a thousands separator.
    parts = [p.replace(",", "").strip(" ()") for p in re.split(r",\s+", text.strip()[:100])]
    if not parts or len(parts) > 3 or not all(p.isdigit() and len(p) < 12 for p in parts):
        return None
    return tuple(int(p) for p in parts)


def _table_text(text: str) -> str:
    """Drop banner lines and anything before the CSV header."""
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]
    for i, ln in enumerate(lines):
        if ln.startswith('"ID"') or ln.startswith("ID,"):
            return "\n".join(lines[i:])
    return ""


def parse_raw_kernels(text: str) -> list[RawKernel]:
    """All kernels in an ncu CSV (details or raw page), in the order of their IDs.
    Raises ValueError (only) when the table cannot be read."""
    table = _table_text(text)
    if not table:
        return []
    try:
        rows = list(csv.reader(io.StringIO(table)))
    except csv.Error as e:
        raise ValueError(f"the CSV table is malformed ({e})") from e
    header = rows[0]
    if "Metric Name" in header:
        return _from_details(header, rows[1:])
    return _from_raw_page(header, rows[1:])


def _kernel_for(kernels: dict[int, RawKernel], row: dict[str, str]) -> RawKernel | None:
    """The kernel this row belongs to (None past MAX_KERNELS)."""
    kid = int(min(max(parse_number(row.get("ID", "0")) or 0, 0), 1 << 31))
    k = kernels.get(kid)
    if k is None:
        if len(kernels) >= MAX_KERNELS:
            return None
        k = RawKernel(
            id=kid,
            name=clean(row.get("Kernel Name", ""), 200),
            block=_dims(row.get("Block Size", "")),
            grid=_dims(row.get("Grid Size", "")),
            device=clean(row.get("Device", ""), 80),
            cc=clean(row.get("CC", ""), 16),
        )
        kernels[kid] = k
    return k


def _store(k: RawKernel, section: str, name: str, unit: str, text: str) -> None:
    if len(k.metrics) >= MAX_METRICS:
        return
    section, name, unit = clean(section, 80), clean(name, 160), clean(unit, 40)
    value, base_unit = to_base_unit(parse_number(text), unit)
    m = RawMetric(section=section, name=name, unit=base_unit, value=value, text=clean(text, 80))
    keys = [name, f"{section}/{name}"]
    # `--print-metric-name label-name` prints "Duration (gpu__time_duration.sum)".
    both = re.match(r"^(.*\S)\s+\(([a-z0-9_]+__[A-Za-z0-9_.]+)\)$", name)
    if both:
        keys += [both.group(1), f"{section}/{both.group(1)}", both.group(2)]
    for key in keys:
        # The first occurrence wins: a section's headline value comes before body rows.
        k.metrics.setdefault(_norm(key), m)


def _from_details(header: list[str], rows: list[list[str]]) -> list[RawKernel]:
    kernels: dict[int, RawKernel] = {}
    for cells in rows:
        if len(cells) < 2:
            continue
        row = dict(zip(header, cells, strict=False))
        if not row.get("ID", "").strip():
            continue
        k = _kernel_for(kernels, row)
        if k is None:
            continue
        section = row.get("Section Name", "").strip()
        name = row.get("Metric Name", "").strip()
        if name:
            _store(k, section, name, row.get("Metric Unit", ""), row.get("Metric Value", ""))
        rule = row.get("Rule Name", "").strip()
        if rule and len(k.rules) < MAX_RULES:
            k.rules.append(
                RuleHint(
                    rule=clean(rule, 80),
                    kind=clean(row.get("Rule Type", ""), 12),
                    section=clean(section, 80),
                    description=clean(row.get("Rule Description", ""), 600),
                    speedup_type=clean(row.get("Estimated Speedup Type", ""), 20),
                    est_speedup_pct=parse_number(row.get("Estimated Speedup", "")),
                )
            )
    return [kernels[i] for i in sorted(kernels)]


_ID_COLUMNS = {
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Kernel Time",
    "Function Name",
}


def _from_raw_page(header: list[str], rows: list[list[str]]) -> list[RawKernel]:
    units: list[str] = [""] * len(header)
    kernels: dict[int, RawKernel] = {}
    for cells in rows:
        row = dict(zip(header, cells, strict=False))
        if not row.get("ID", "").strip():
            units = cells + [""] * (len(header) - len(cells))  # the units row has no ID
            continue
        k = _kernel_for(kernels, row)
        if k is None:
            continue
        for i, col in enumerate(header):
            if col not in _ID_COLUMNS and i < len(cells):
                _store(k, "raw", col, units[i], cells[i])
    return [kernels[i] for i in sorted(kernels)]
