"""The names a model's parameters are shown by in the panel: Blender's own, from the model's
parameter rows, else the model's labels."""

from __future__ import annotations

from ...warp_core.models import get_model
from ..models.parameter_rows import parameter_labels
from ..models.registry import scene_model


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
