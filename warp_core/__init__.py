"""Fit to Target physics core: Blender's cloth model in Warp, gradients, losses, fitting.

Never imports bpy: usable from plain Python, tests and farm jobs.
"""

from .mesh import ClothMesh, grid_mesh
from .params import PARAMETER_NAMES, ClothParams

__all__ = ["ClothMesh", "ClothParams", "PARAMETER_NAMES", "grid_mesh"]
