"""What the panel reads of an object's fit: its last record, and the names its parameters
are shown by (Blender's own, from the model's parameter rows)."""

from __future__ import annotations

import json

import bpy

from ...warp_core.models import get_model
from ..models.parameter_rows import parameter_labels
from ..models.registry import scene_model


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


def model_labels(model_name: str) -> dict[str, str]:
    """Parameter name -> Blender's name of the setting ("Air Viscosity") for a model; the
    model's own labels for one this version shows no rows of; {} for an unknown model."""
    try:
        labels = {p.name: p.label for p in get_model(model_name).parameters}
    except ValueError:  # a record of a model this version does not know
        return {}
    try:
        labels.update(parameter_labels(scene_model(model_name).parameter_groups))
    except ValueError:
        pass
    return labels
