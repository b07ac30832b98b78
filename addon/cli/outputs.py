"""What the batch command writes: the JSON report and the fitted .blend, each atomically
(a temporary file beside the target, then a rename), so a crash never leaves half of one."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import bpy

from ...warp_core.fit.report import json_safe
from ...warp_core.io import atomic_replace, atomic_write_text
from ..extension import addon_version
from ..scene.records import REPORT_VERSION


def report_document(
    records: list[dict[str, Any]], input_path: Path, saved_to: str | None, status: str, code: int
) -> dict[str, Any]:
    """The report of one run: its outcome and one record per object."""
    devices = sorted({r.get("device") for r in records if r.get("device")})
    return json_safe(
        {
            "version": REPORT_VERSION,
            "addon_version": addon_version(),
            "device": devices[0] if len(devices) == 1 else ",".join(devices) or None,
            "blend_file": str(input_path),
            "saved_to": saved_to,
            "status": status,
            "exit_code": code,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "objects": records,
        }
    )


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def save_blend_atomically(path: Path) -> None:
    """Save a copy of the open file to ``path`` through a temporary file in the same folder
    (so relative paths stay valid and a crash never leaves half a .blend)."""
    backups: list[Path] = []

    def produce(tmp: Path) -> None:
        # saving over the (empty) temporary makes Blender keep it as "<tmp>1"
        backups.append(tmp.with_name(tmp.name + "1"))
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp), copy=True)

    try:
        atomic_replace(path, produce, suffix=".blend")
    finally:
        for backup in backups:
            backup.unlink(missing_ok=True)
