"""What the batch command writes: the JSON report and the fitted .blend, each atomically
(a temporary file beside the target, fsynced, verified, then renamed), so a crash, a
signal or a full disk never leaves half of one and never replaces a good file. The bake's
caches are renamed into place with the .blend that plays them, never before it is verified."""

from __future__ import annotations

import datetime
import errno
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bpy
import numpy as np

from ...warp_core.fit.verdict.report import json_safe
from ...warp_core.io import (
    atomic_replace,
    atomic_write_bytes,
    commit_temporaries,
    discard_temporaries,
    stage_bytes,
)
from ...warp_core.pc2 import encode_pc2
from ..extension import addon_version
from ..scene.records import REPORT_VERSION
from .streams import native_stdout_silenced

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_SEEKABLE_FOOTER = b"\xb1\xea\x92\x8f"  # Blender's compressed files end with a seek table
END_BLOCK = b"ENDB"  # an uncompressed .blend ends with this block


def report_document(
    records: list[dict[str, Any]],
    input_path: Path | None,
    saved_to: str | None,
    status: str,
    code: int,
    shared: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report of one run: its outcome, one record per object, with ``--shared`` the
    shared fit's own entry (its joint outcome and what the objects determine together), and
    ``extra`` fields (where it ran, the files it wrote and read, the error of bad input)."""
    devices = sorted({r.get("device") for r in records if r.get("device")})
    return json_safe(
        {
            "version": REPORT_VERSION,
            "addon_version": addon_version(),
            "device": devices[0] if len(devices) == 1 else ",".join(devices) or None,
            "blend_file": str(input_path) if input_path is not None else None,
            "saved_to": saved_to,
            "status": status,
            "exit_code": code,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "objects": records,
            **({"shared": shared} if shared is not None else {}),
            **(extra or {}),
        }
    )


def map_lines(record: dict[str, Any]) -> list[str]:
    """One line per weight map of an object's record (after its before -> after table): each
    region's value, or the span of a free map's weights, and the vertex group written."""
    lines = []
    for kind, entry in (record.get("maps") or {}).items():
        if entry.get("mode") == "regions":
            what = ", ".join(
                f"{name} {region['value']:.3g}"
                + ("" if region.get("determined", True) else " (undetermined)")
                for name, region in (entry.get("regions") or {}).items()
            )
        else:
            weights = entry.get("weights") or {}
            what = f"weights {weights.get('min', 0.0):.2f}-{weights.get('max', 0.0):.2f}"
            if entry.get("undetermined_vertices"):
                what += f", {entry['undetermined_vertices']} vertices undetermined"
        group = entry.get("group")
        where = f"group '{group}'" if group and record.get("status") != "cancelled" else "not written"
        lines.append(f"  {kind} map ({entry.get('mode')}): {what} -> {where}")
    return lines


def write_json_atomically(
    path: Path, data: dict[str, Any], before_commit: Callable[[], None] | None = None
) -> None:
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"), verify=json.loads, before_commit=before_commit)


def blender_save(path: Path) -> None:
    """Blender's own save of a copy of the open file (one place, so tests can fail it)."""
    with native_stdout_silenced():
        bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)


def check_blend(path: Path, object_names: Sequence[str]) -> None:
    """Raise OSError unless ``path`` is a complete .blend holding ``object_names``.

    On a full disk Blender can report a compressed save as done and leave a truncated
    file, so the file's last bytes are checked, then Blender reads its block list back."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(12)
        f.seek(max(0, size - 64))
        tail = f.read()
    if head.startswith(ZSTD_MAGIC):
        complete = tail.endswith(ZSTD_SEEKABLE_FOOTER)
    elif head.startswith(b"BLENDER"):
        complete = END_BLOCK in tail
    else:
        complete = False
    if not complete:
        raise OSError(errno.EIO, f"the saved file is incomplete ({size} bytes; is the disk full?)")
    try:
        with bpy.data.libraries.load(str(path)) as (source, _unused):
            names = set(source.objects)
    except (OSError, RuntimeError, ValueError) as e:
        raise OSError(errno.EIO, f"the saved file does not read back ({e})") from None
    missing = [n for n in object_names if n not in names]
    if missing:
        raise OSError(errno.EIO, f"the saved file lacks object(s) {', '.join(missing)}")


def save_blend_atomically(
    path: Path,
    object_names: Sequence[str] = (),
    before_commit: Callable[[], None] | None = None,
    caches: Sequence[tuple[Path, Path]] = (),
) -> None:
    """Save a copy of the open file to ``path`` through a temporary file in the same folder
    (so relative paths stay valid), checked to be complete and to hold ``object_names``.
    ``caches`` (verified temporary, target) are renamed into place just before it, as one
    change: if the save fails, or a signal abandons it, none of them replaces its target."""
    atomic_replace(
        path,
        blender_save,
        lambda tmp: check_blend(tmp, object_names),
        suffix=".blend",
        create=False,  # saving over an existing file would make Blender keep a "<tmp>1" backup
        before_commit=before_commit,
        together=caches,
    )


class StagedCaches:
    """The bake's caches as verified temporaries beside their targets, renamed into place
    with the .blend that plays them (:func:`save_blend_atomically`), or by themselves when
    no .blend is saved: no .blend, new or previous, plays a cache of another run."""

    def __init__(self, after_stage: Callable[[], None]) -> None:
        self.after_stage = after_stage  # a checkpoint: raise to abandon the bake
        self.pairs: list[tuple[Path, Path]] = []  # (temporary, cache)

    def stage(self, path: Path, samples: np.ndarray, start: int) -> None:
        self.pairs.append((stage_bytes(path, encode_pc2(samples, start)), path))
        self.after_stage()

    def commit(self) -> list[str]:
        commit_temporaries(self.pairs)
        return self.committed()

    def committed(self) -> list[str]:
        """The caches now in place (renamed by :func:`save_blend_atomically`)."""
        done, self.pairs = [str(path) for _, path in self.pairs], []
        return done

    def discard(self) -> set[str]:
        """Remove the temporaries; returns the caches they were for."""
        discard_temporaries(tmp for tmp, _ in self.pairs)
        dropped, self.pairs = {str(path) for _, path in self.pairs}, []
        return dropped
