"""Material models by name.

Every subpackage of this package is a built-in model (its ``MODEL``), found by scanning the
folder and imported on first use, so importing the registry stays cheap and a model's Warp
kernels are only compiled when it is used. Tests and scripts add their own with
:func:`register_model`.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Model, ModelBatchRollout, ModelRollout, ModelSettings, Parameter, Simulator

# The model a fit problem simulates when it names none: Blender's cloth (problem files written
# before problems named their model are all its problems).
DEFAULT_MODEL = "blender_cloth"

# name -> module (relative to this package) whose ``MODEL`` is the model
_BUILTIN: dict[str, str] = {
    info.name: f".{info.name}" for info in pkgutil.iter_modules(__path__) if info.ispkg
}
_REGISTERED: dict[str, Model] = {}


def register_model(model: Model) -> None:
    """Make ``model`` available under ``model.name`` (replacing one of the same name)."""
    _REGISTERED[model.name] = model


def unregister_model(name: str) -> None:
    _REGISTERED.pop(name, None)


def model_names() -> list[str]:
    return list(dict.fromkeys([*_BUILTIN, *_REGISTERED]))


def get_model(name: str) -> Model:
    """The model called ``name``; ValueError naming the known models otherwise."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _BUILTIN:
        model = importlib.import_module(_BUILTIN[name], __name__).MODEL
        _REGISTERED[name] = model
        return model
    raise ValueError(f"unknown model {name!r}; choose from {', '.join(model_names())}")


__all__ = [
    "Model",
    "ModelBatchRollout",
    "ModelRollout",
    "ModelSettings",
    "Parameter",
    "Simulator",
    "get_model",
    "model_names",
    "register_model",
    "unregister_model",
]
