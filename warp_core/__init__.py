"""Fit to Target physics core: Blender's cloth model in Warp, gradients, losses, fitting.

Never imports bpy: usable from plain Python, tests and farm jobs.
"""

from .mesh import ClothMesh, grid_mesh
from .params import PARAMETER_NAMES, ClothParams
from .simulation import ClothSimulator, Rollout

__all__ = ["ClothMesh", "ClothParams", "ClothSimulator", "PARAMETER_NAMES", "Rollout", "grid_mesh"]
