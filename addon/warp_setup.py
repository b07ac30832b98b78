"""Warp on the Blender side: where its kernel cache lives, and the device a fit runs on."""

from __future__ import annotations

import os
import re

import bpy

from .errors import FitInputError
from .extension import EXTENSION_PACKAGE


def configure_warp() -> None:
    """Quiet Warp, and keep its kernel cache in the extension's user folder when installed as
    an extension (unless ``WARP_CACHE_PATH`` says otherwise). Must run before Warp initializes."""
    import warp as wp

    wp.config.quiet = True
    if wp.config.log_level < wp.LOG_WARNING:
        wp.config.log_level = wp.LOG_WARNING
    if os.environ.get("WARP_CACHE_PATH") or not EXTENSION_PACKAGE.startswith("bl_ext."):
        return
    try:
        wp.config.kernel_cache_dir = bpy.utils.extension_path_user(
            EXTENSION_PACKAGE, path="warp_cache", create=True
        )
    except (ValueError, OSError):  # not an installed extension after all
        pass


def resolve_device(name: str) -> str:
    """ "AUTO" -> the first CUDA device, else "cpu"; validates "cuda"/"cuda:N"."""
    configure_warp()
    import warp as wp

    name = (name or "AUTO").strip()
    count = wp.get_cuda_device_count()
    if name.upper() == "AUTO":
        return "cuda:0" if count > 0 else "cpu"
    if name.lower() == "cpu":
        return "cpu"
    match = re.fullmatch(r"cuda(?::(\d+))?", name.lower())
    if not match:
        raise FitInputError(f"unknown device '{name}': use cpu, cuda or cuda:N")
    index = int(match.group(1) or 0)
    if index >= count:
        found = f"{count} CUDA device(s) found" if count else "no CUDA device found"
        raise FitInputError(f"device cuda:{index} is not available ({found})")
    return f"cuda:{index}"
