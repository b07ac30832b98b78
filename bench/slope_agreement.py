"""How often a gradient agrees with the slope central differences measure: the shares the
gradient benchmarks (``gradients.py`` for parameters, ``map_gradients.py`` for maps) report.
Plain Python: rows are dicts with the reference ``slope``, its ``twin`` (the same difference
from a point a rounding error away), where measured its ``half`` (the difference over half
the step) and one entry per gradient kind."""

from __future__ import annotations

import math
from typing import Any


def _close(slope: float, other: float) -> bool:
    return slope * other > 0.0 and 0.5 <= slope / other <= 2.0


def determined(row: dict[str, Any]) -> bool:
    """The slope keeps its sign and stays within 2x when the point moves by a rounding error
    (``twin``) and, where measured, when the step is halved (``half``): a reference a
    gradient can be judged by."""
    return _close(row["slope"], row["twin"]) and ("half" not in row or _close(row["slope"], row["half"]))


def agreement(rows: list[dict[str, Any]], kind: str) -> tuple[dict[str, Any], list, list, list]:
    """The shares of rows whose ``kind`` entry has the slope's sign, and is within 2x of it (a
    non-finite one counts as neither), overall and where the slope is determined; and the
    rows with a slope, with its sign, and within 2x (for a caller's further shares)."""
    signed = [r for r in rows if r["slope"] != 0.0]
    same = [r for r in signed if r[kind] * r["slope"] > 0.0]
    within = [r for r in same if 0.5 <= r[kind] / r["slope"] <= 2.0]
    kept = [r for r in signed if determined(r)]
    shares = {
        "non_finite": sum(1 for r in rows if not math.isfinite(r[kind])),
        "sign": len(same) / max(len(signed), 1),
        "within_2x": len(within) / max(len(signed), 1),
        "determined": len(kept),
        "sign_determined": sum(1 for r in same if determined(r)) / max(len(kept), 1),
        "within_2x_determined": sum(1 for r in within if determined(r)) / max(len(kept), 1),
    }
    return shares, signed, same, within
