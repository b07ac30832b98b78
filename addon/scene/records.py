"""A fit's outcome as the plain record the object keeps (``result_json``) and the batch
report lists, for a finished fit and for a failed one."""

from __future__ import annotations

import datetime
import json
from typing import Any

import bpy

from ...warp_core.fit import FitResult
from ...warp_core.fit.verdict.report import json_safe
from ...warp_core.models import get_model
from ..extension import addon_version
from ..request import FitRequest, PreparedFit

REPORT_VERSION = 1


def result_record(prepared: PreparedFit, result: FitResult) -> dict[str, Any]:
    """The object's report entry and its ``result_json``."""
    r = prepared.request
    summary = result.summary()
    record = {
        "name": r.object_name,
        "object": r.object_name,
        "model": r.model,
        **summary,
        "warnings": list(prepared.warnings) + list(summary.get("warnings") or []),
        "status": "cancelled" if result.cancelled else "ok",
        "fit": list(r.fit),
        "ties": dict(r.ties),
        "loss": prepared.problem.loss_kind,
        "targets": [t.describe() for t in r.targets],
        "target_frames": prepared.problem.target_frames,
        "start_frame": prepared.problem.start_frame,
        "start_values": dict(r.start_values),
        "blend_file": bpy.data.filepath,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": result.device,
        "addon_version": addon_version(),
    }
    for asked in r.maps if "maps" in record else ():
        # the group each map goes to ("" until written: the modifier's, or a new one)
        record["maps"][asked.kind]["group"] = asked.group
    tracks = prepared.problem.tracks
    if tracks is not None:
        record["targets"] = [
            f"{len(tracks.bindings)} tracks of Movie Clip '{tracks.clip}' ({len(tracks.marker_frame)} "
            f"markers) seen by camera '{tracks.camera}'"
        ]
        record["footage"] = {
            "clip": tracks.clip,
            "camera": tracks.camera,
            "tracks": len(tracks.bindings),
            "markers": len(tracks.marker_frame),
            "robust_above_px": tracks.huber_px,
        }
    describe = getattr(get_model(r.model), "geometry_summary", None)
    if describe is not None:  # what the mesh became for the model (a soft body's lattice)
        record["geometry"] = describe(prepared.problem.mesh, prepared.problem.model_settings)
    return json_safe(record)


def failure_record(request: FitRequest, error: str, seconds: float = 0.0) -> dict[str, Any]:
    """The record of a fit that failed (no values written)."""
    return {
        **input_failure_record(request.object_name, request.model, error, seconds),
        "fit": list(request.fit),
        "target_frames": sorted(t.frame for t in request.targets),
    }


def input_failure_record(name: str, model: str, error: str, seconds: float = 0.0) -> dict[str, Any]:
    """The record of an object whose fit never started (its input refused)."""
    return {
        "name": name,
        "object": name,
        "model": model,
        "status": "failed",
        "error": error,
        "params": {},
        "initial_params": {},
        "initial_loss": None,
        "final_loss": None,
        "rmse_m": None,
        "max_error_m": None,
        "iterations": 0,
        "seconds": seconds,
        "warnings": [],
        "fit": [],
        "target_frames": [],
    }


def surface_note(record: dict[str, Any]) -> str | None:
    """Why a surface-loss RMSE can exceed its max error: they measure different distances."""
    if record.get("loss") != "surface" or record.get("status") == "failed":
        return None
    return (
        "surface loss: RMSE averages both directions (cloth vertices to the target surface and "
        "target vertices to the cloth surface); max error is the farthest cloth vertex from the "
        "target surface, so the RMSE can be the larger"
    )


def quoted_names(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def shared_summary(summary: dict) -> str:
    """One line on a shared fit: what the objects determine together that one alone does not."""
    names = summary.get("objects") or []
    text = f"Shared material of {quoted_names(names)}: {summary.get('outcome')}"
    jointly = summary.get("determined_jointly") or []
    if jointly:
        alone = summary.get("undetermined_alone") or {}
        which = "; ".join(f"{n} alone leaves {', '.join(u)} undetermined" for n, u in alone.items() if u)
        text += f"; determined only together: {', '.join(jointly)} ({which})"
    if summary.get("undetermined"):
        text += f"; still undetermined: {', '.join(summary['undetermined'])}"
    return text


def read_record(ob: bpy.types.Object) -> dict | None:
    """The object's last fit record (``result_json``), or None without a readable one."""
    text = ob.fit_to_target.result_json
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
