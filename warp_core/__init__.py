"""Fit to Target physics core: material models in Warp, gradients, losses, fitting.

Never imports bpy: usable from plain Python, tests and farm jobs.
"""

from .mesh import ClothMesh, grid_mesh
from .models import get_model, model_names, register_model
from .models.blender_cloth import PARAMETER_NAMES, ClothParams, ClothSimulator, Rollout

__all__ = [
    "ClothMesh",
    "ClothParams",
    "ClothSimulator",
    "PARAMETER_NAMES",
    "Rollout",
    "get_model",
    "grid_mesh",
    "model_names",
    "register_model",
]
