"""The ``blender_cloth`` model's scene side: the Cloth modifier, its colliders, force fields and
refused settings (mirrors ``warp_core/models/blender_cloth/``)."""

from .scene_model import SCENE_MODEL

__all__ = ["SCENE_MODEL"]
