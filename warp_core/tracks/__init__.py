"""Footage targets: Blender motion-tracking markers as fit targets (pure numpy, no bpy)."""

from .camera import (
    MODEL_COEFFICIENTS,
    Intrinsics,
    camera_pose,
    clip_to_scene_frame,
    depth,
    normalized_to_pixels,
    pixel_ray,
    pixels_to_normalized,
    project,
    scene_to_clip_frame,
    to_camera,
    undistort,
)

__all__ = [
    "MODEL_COEFFICIENTS",
    "Intrinsics",
    "camera_pose",
    "clip_to_scene_frame",
    "depth",
    "normalized_to_pixels",
    "pixel_ray",
    "pixels_to_normalized",
    "project",
    "scene_to_clip_frame",
    "to_camera",
    "undistort",
]
