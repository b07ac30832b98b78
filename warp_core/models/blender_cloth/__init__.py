"""Blender's cloth modifier in Warp: mass-spring forces, one linearized backward-Euler
solve per substep with Blender's truncated CG, and its adjoint.

Modules, from the bottom up: ``params`` (the settings), ``topology`` (springs and hinges,
numpy), ``force_kernels``, ``solver_kernels`` and ``adjoint_kernels`` (Warp kernels),
``schedule`` (substep times, CG limits), ``tape`` (launching outside the caller's tape),
``arrays`` (the mesh's fixed device arrays), ``buffers`` (one substep's work arrays),
``state`` (what a rollout carries and writes), ``step`` (one substep's launches),
``graphs`` (substeps as captured graphs), ``maps`` (the vertex groups' weight maps: their
gradient and new weights), ``adjoint`` (the backward pass), ``simulator``
(``ClothSimulator`` and its rollouts) and ``model`` (the registry entry).
"""

from .model import MODEL, BlenderClothModel
from .params import ALL_PARAMETER_NAMES, CLOTH_SETTINGS_FIELDS, PARAMETER_BOUNDS, PARAMETER_NAMES, ClothParams
from .simulator import ClothSimulator, Rollout

__all__ = [
    "ALL_PARAMETER_NAMES",
    "CLOTH_SETTINGS_FIELDS",
    "MODEL",
    "PARAMETER_BOUNDS",
    "PARAMETER_NAMES",
    "BlenderClothModel",
    "ClothParams",
    "ClothSimulator",
    "Rollout",
]
