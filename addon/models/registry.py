"""The Blender-side models by name, and the model choice of the panel.

A second model adds its scene side next to :mod:`.blender_cloth` (a :class:`~.base.SceneModel`),
lists it in ``_SCENE_MODELS`` and gives its entry in ``MODEL_CHOICES`` (leaving
``_PLANNED``); the panel, the checks, the fit and the batch command then reach it by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...warp_core.models import get_model
from ..errors import FitInputError
from .base import SceneModel
from .blender_cloth import SCENE_MODEL as BLENDER_CLOTH

if TYPE_CHECKING:
    import bpy

DEFAULT_MODEL = BLENDER_CLOTH.name

# The panel's model menu: (enum identifier, model name, label, description).
MODEL_CHOICES = (
    ("BLENDER_CLOTH", "blender_cloth", "Blender Cloth", "Fit the settings of the object's Cloth modifier"),
    ("SOFT_BODY", "soft_body", "Soft Body (later)", "Not available yet: Soft Body fitting is planned"),
)
MODEL_ITEMS = [(identifier, label, text) for identifier, _, label, text in MODEL_CHOICES]
MODEL_NAMES = {identifier: name for identifier, name, _, _ in MODEL_CHOICES}

_SCENE_MODELS: dict[str, SceneModel] = {BLENDER_CLOTH.name: BLENDER_CLOTH}
# In the menu already, refused (with this message) until their scene side exists.
_PLANNED = {"soft_body": "Soft Body fitting is not available yet: choose the Blender Cloth model"}


def scene_models() -> list[SceneModel]:
    return list(_SCENE_MODELS.values())


def scene_model(name: str) -> SceneModel:
    """The scene side of the model called ``name``; FitInputError if it has none (yet)."""
    model = _SCENE_MODELS.get(name)
    if model is None:
        raise FitInputError(_PLANNED.get(name) or f"unknown model '{name}': choose the Blender Cloth model")
    return model


def object_model(ob: bpy.types.Object) -> SceneModel:
    """The scene side of the model chosen on ``ob``.

    A model that is only planned has no scene side: the object's targets, Apply, Revert,
    Bake and presets then act through the default model's (as they did before the choice
    existed), and only fitting refuses it (:func:`scene_model`).
    """
    settings = getattr(ob, "fit_to_target", None)
    name = MODEL_NAMES.get(settings.model, DEFAULT_MODEL) if settings is not None else DEFAULT_MODEL
    return _SCENE_MODELS.get(name, _SCENE_MODELS[DEFAULT_MODEL])


def parameter_names(name: str) -> tuple[str, ...]:
    """The fittable parameters of the model called ``name``, in its (gradient) order."""
    return tuple(p.name for p in get_model(name).parameters)
