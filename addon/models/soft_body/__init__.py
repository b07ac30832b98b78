"""The ``soft_body`` model's scene side: the Soft Body modifier's mesh, goal pins and colliders,
and the model's values on the object (mirrors ``warp_core/models/soft_body/``)."""

from .scene_model import SCENE_MODEL

__all__ = ["SCENE_MODEL"]
