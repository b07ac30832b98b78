"""Blender's cloth modifier in Warp: mass-spring forces, one linearized backward-Euler
solve per substep with Blender's truncated CG, and its adjoint."""

from .model import MODEL, BlenderClothModel
from .params import CLOTH_SETTINGS_FIELDS, PARAMETER_BOUNDS, PARAMETER_NAMES, ClothParams
from .simulator import ClothSimulator, Rollout

__all__ = [
    "CLOTH_SETTINGS_FIELDS",
    "MODEL",
    "PARAMETER_BOUNDS",
    "PARAMETER_NAMES",
    "BlenderClothModel",
    "ClothParams",
    "ClothSimulator",
    "Rollout",
]
