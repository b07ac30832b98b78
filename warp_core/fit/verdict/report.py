"""The result of a fit as plain data and as text: one before -> after table for the
command line, ``python -m warp_core`` and the panel."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...targets.units import format_mm, unit_of

__all__ = ["format_mm", "format_table", "format_value", "json_safe", "record_misfit"]


def format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def record_misfit(record: dict[str, Any], key: str) -> str:
    """A misfit entry of a result record (``rmse``, ``initial_rmse``, ``max_error``,
    ``motion``, ``tolerance``) in the record's unit: ``<key>_m``, or ``<key>_px`` for
    footage targets."""
    unit = unit_of(record.get("unit"))
    return unit.format(record.get(f"{key}_{unit.symbol}"))


# a record's "error" names the step that failed after a fit that ran ("bake: <reason>")
AFTER_FIT_STEPS = ("bake",)


def format_table(record: dict[str, Any]) -> list[str]:
    """Before -> after table of one object's result (batch output and reports), then its
    outcome with the reason in words, then the warnings."""
    name = record.get("name", "?")
    if record.get("status") == "failed":
        step, sep, reason = str(record.get("error", "")).partition(": ")
        if sep and step in AFTER_FIT_STEPS and record.get("params"):
            # the fit ran and its values were written; what came after it failed
            return [*_fit_lines(record), f"  {step} failed: {reason}"]
        return [f"{name}: fit failed: {record.get('error', '')}"]
    return _fit_lines(record)


def _fit_lines(record: dict[str, Any]) -> list[str]:
    name = record.get("name", "?")
    head = (
        f"{name}: {record.get('model')}, {record.get('iterations')} iterations, "
        f"{record.get('seconds', 0.0):.1f} s on {record.get('device')}"
    )
    if record.get("status") == "cancelled":
        head += " (cancelled: best values so far)"
    rows = [("parameter", "before", "after")]
    ties = record.get("ties") or {}
    initial = record.get("initial_params") or {}
    for pname, after in (record.get("params") or {}).items():
        label = pname + (f" (= {ties[pname]})" if pname in ties else "")
        rows.append((label, format_value(initial.get(pname)), format_value(after)))
    rmse = unit_of(record.get("unit")).rmse_label
    rows.append((rmse, record_misfit(record, "initial_rmse"), record_misfit(record, "rmse")))
    rows.append(("max error", "", record_misfit(record, "max_error")))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    w2 = max(len(r[2]) for r in rows)
    lines = [head] + [f"  {a:<{w0}}  {b:>{w1}}  ->  {c:>{w2}}" for a, b, c in rows]
    if record.get("outcome"):
        lines.append(f"  outcome: {record['outcome']}: {record.get('outcome_reason') or ''}".rstrip(": "))
    lines += [f"  warning: {w}" for w in record.get("warnings") or []]
    return lines


def json_safe(value: Any) -> Any:
    """Plain JSON types; NaN and infinities become None (strict JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)
