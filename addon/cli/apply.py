"""``--apply``: fitted values from earlier runs' reports written into the open scene, without
a fit. On a farm each object is fitted by its own task, which writes only its report; one
last task applies every report, bakes and saves the shot, so the .blend has one writer."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bpy

from ..errors import FitInputError
from ..models.registry import object_model
from ..scene.write_back import store_record
from .args import UsageError
from .paths import REPORT_BYTES_MAX

# options that choose how to fit: an --apply run fits nothing, so each would be ignored
FIT_OPTIONS = (
    "target",
    "target_tracks",
    "camera",
    "tolerance_px",
    "model",
    "fit",
    "no_ties",
    "fit_map",
    "map_regions",
    "map_smoothness",
    "max_iters",
    "time_budget",
    "tolerance",
    "loss",
    "allow_unmodeled",
    "shared",
    "preset",
    "save_preset",
)


@dataclass
class FitRecord:
    """One object's record in a report that ``--apply`` read (made by :func:`read_results`,
    written into the scene by :func:`apply_record`)."""

    source: Path  # the report it came from
    record: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.record.get("name", ""))

    @property
    def fitted(self) -> bool:
        """Whether the fit ran and has values to write (an honest misfit has them too)."""
        return self.record.get("status") == "ok" and bool(self.record.get("params"))


def check_apply_options(args: argparse.Namespace) -> None:
    """``--apply`` with an option that only changes a fit is refused by name."""
    given = [name for name in FIT_OPTIONS if getattr(args, name) not in (None, False, [], "")]
    if given:
        options = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UsageError(f"--apply writes the values of earlier fits and fits nothing: leave out {options}")


def result_files(given: list[str]) -> list[Path]:
    """The report files named by ``--apply``: files, and every ``*.json`` of a folder, by name."""
    files: list[Path] = []
    for value in given:
        path = Path(value).expanduser().resolve()
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json") if p.is_file())
            if not found:
                raise UsageError(f"--apply {value}: the folder holds no .json report")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"--apply {value}: no such file or folder")
    return list(dict.fromkeys(files))


def read_results(given: list[str]) -> tuple[list[FitRecord], list[str]]:
    """Every object record of the reports ``--apply`` names, and one line per report that ended
    without any (bad input, an interrupted run before its first fit). UsageError for a file
    that is no report, or for one object in two reports."""
    records: list[FitRecord] = []
    empty: list[str] = []
    for path in result_files(given):
        document = _report(path)
        objects = document["objects"]
        if not objects:
            why = document.get("error") or f"status {document.get('status')}"
            empty.append(f"{path}: no fitted object ({why})")
        records += [FitRecord(path, record) for record in objects]
    seen: dict[str, Path] = {}
    for item in records:
        if item.name in seen:
            raise UsageError(
                f"--apply: '{item.name}' has results in both {seen[item.name]} and {item.source}: "
                "apply one of them"
            )
        seen[item.name] = item.source
    return records, empty


def _report(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read(REPORT_BYTES_MAX + 1)
        document = json.loads(raw) if len(raw) <= REPORT_BYTES_MAX else None
    except OSError as e:
        raise UsageError(f"--apply {path}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:
        raise UsageError(f"--apply {path}: not a JSON report ({e})") from None
    if not isinstance(document, dict) or not isinstance(document.get("objects"), list):
        raise UsageError(f"--apply {path}: not a report of this command (written by --report)")
    if not all(isinstance(r, dict) and isinstance(r.get("name"), str) for r in document["objects"]):
        raise UsageError(f"--apply {path}: an object entry without a name; the report was changed by hand?")
    return document


def objects_of(scene: bpy.types.Scene, results: list[FitRecord]) -> list[bpy.types.Object]:
    """The scene's objects the results are for, each with the model its result was fitted with."""
    objects = []
    for item in results:
        ob = scene.objects.get(item.name)
        if ob is None:
            raise UsageError(
                f"--apply {item.source}: the scene '{scene.name}' has no object '{item.name}'; "
                "apply it to the file that was fitted"
            )
        model = item.record.get("model")
        if item.fitted and object_model(ob).name != model:
            raise UsageError(
                f"--apply {item.source}: '{item.name}' was fitted with the {model} model, but its Fit "
                f"settings choose {object_model(ob).name}"
            )
        objects.append(ob)
    return objects


def apply_record(ob: bpy.types.Object, item: FitRecord) -> dict[str, Any]:
    """The result's values into ``ob`` as its fit would have written them (Revert restores the
    ones it replaced); a failed or interrupted fit's record is reported and writes nothing."""
    record = {**item.record, "applied_from": str(item.source)}
    if not item.fitted:
        status = record.get("status")
        why = "holds no fitted values" if status == "ok" else f"ended {status}"
        record.update(status="failed", error=record.get("error") or f"the fit {why}; nothing applied")
        return record
    try:
        return store_record(ob, record)
    except FitInputError as e:
        raise UsageError(f"--apply {item.source}: {e}") from e
