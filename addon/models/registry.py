"""The Blender-side models by name, and the model choice of the panel.

Each model has its scene side (a :class:`~.base.SceneModel`: :mod:`.blender_cloth`,
:mod:`.soft_body`), listed in ``_SCENE_MODELS`` with its entry in ``MODEL_CHOICES``; the
panel, the checks, the fit and the batch command reach it by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...warp_core.models import get_model
from ..errors import FitInputError
from .base import SceneModel
from .blender_cloth import SCENE_MODEL as BLENDER_CLOTH
from .soft_body import SCENE_MODEL as SOFT_BODY

if TYPE_CHECKING:
    import bpy

DEFAULT_MODEL = BLENDER_CLOTH.name

# The panel's model menu: (enum identifier, model name, label, description).
MODEL_CHOICES = (
    ("BLENDER_CLOTH", "blender_cloth", "Blender Cloth", "Fit the settings of the object's Cloth modifier"),
    (
        "SOFT_BODY",
        "soft_body",
        "Soft Body (VBD)",
        "Fit Young's modulus, Poisson ratio, damping and density of a tetrahedral soft body (the object "
        "needs a Soft Body modifier; Blender cannot replay this model: bake it)",
    ),
)
# the default: the model follows the object's physics modifier, until the artist picks one
MODEL_FROM_MODIFIER = "AUTO"
MODEL_ITEMS = [
    (
        MODEL_FROM_MODIFIER,
        "From Modifier",
        "The model of the object's physics modifier: Blender Cloth for a Cloth modifier, Soft Body "
        "(VBD) for an object with a Soft Body modifier and no Cloth modifier",
    ),
    *((identifier, label, text) for identifier, _, label, text in MODEL_CHOICES),
]
MODEL_NAMES = {identifier: name for identifier, name, _, _ in MODEL_CHOICES}

_SCENE_MODELS: dict[str, SceneModel] = {BLENDER_CLOTH.name: BLENDER_CLOTH, SOFT_BODY.name: SOFT_BODY}


def scene_models() -> list[SceneModel]:
    return list(_SCENE_MODELS.values())


def scene_model(name: str) -> SceneModel:
    """The scene side of the model called ``name``; FitInputError naming the known ones."""
    model = _SCENE_MODELS.get(name)
    if model is None:
        known = ", ".join(_SCENE_MODELS)
        raise FitInputError(f"unknown model '{name}': choose one of {known}")
    return model


def object_model(ob: bpy.types.Object) -> SceneModel:
    """The scene side of the model chosen on ``ob``: the one picked in its Fit settings, else
    (:data:`MODEL_FROM_MODIFIER`) the first whose modifier the object has, in the menu's order
    (a Cloth modifier wins over a Soft Body one); the default model's for anything else."""
    settings = getattr(ob, "fit_to_target", None)
    if settings is not None and settings.model == MODEL_FROM_MODIFIER:
        found = [model for model in _SCENE_MODELS.values() if model.find_modifier(ob) is not None]
        return found[0] if found else _SCENE_MODELS[DEFAULT_MODEL]
    name = MODEL_NAMES.get(settings.model, DEFAULT_MODEL) if settings is not None else DEFAULT_MODEL
    return _SCENE_MODELS.get(name, _SCENE_MODELS[DEFAULT_MODEL])


def model_label(name: str) -> str:
    """The menu's label of the model called ``name``."""
    return next(label for _, model, label, _ in MODEL_CHOICES if model == name)


def parameter_names(name: str) -> tuple[str, ...]:
    """The fittable parameters of the model called ``name``, in its (gradient) order."""
    return tuple(p.name for p in get_model(name).parameters)
