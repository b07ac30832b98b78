"""Warp on the Blender side: where its kernel cache lives, and the device a fit runs on."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import bpy

from .errors import FitInputError
from .extension import EXTENSION_PACKAGE

# What Warp's native library prints when it finds no NVIDIA driver: on a machine without
# an NVIDIA GPU that is the normal case, and the fit runs on the CPU.
DRIVER_MISSING = b"Warp CUDA warning: Could not find or load the NVIDIA CUDA driver"
GPU_REQUIREMENT = "an NVIDIA GPU (Turing or newer) with an R580 or newer driver"


@dataclass
class WarpState:
    initialized: bool = False
    driver_missing: bool = False  # no NVIDIA driver: the normal case on a machine without one


WARP = WarpState()


def configure_warp() -> None:
    """Quiet Warp, keep its kernel cache in the extension's user folder when installed as
    an extension (unless ``WARP_CACHE_PATH`` says otherwise), and initialize it."""
    import warp as wp

    if WARP.initialized:
        return
    wp.config.quiet = True
    if wp.config.log_level < wp.LOG_WARNING:
        wp.config.log_level = wp.LOG_WARNING
    if not os.environ.get("WARP_CACHE_PATH") and EXTENSION_PACKAGE.startswith("bl_ext."):
        try:
            wp.config.kernel_cache_dir = bpy.utils.extension_path_user(
                EXTENSION_PACKAGE, path="warp_cache", create=True
            )
        except (ValueError, OSError):  # not an installed extension after all
            pass
    WARP.driver_missing = DRIVER_MISSING in _stderr_of(wp.init)
    WARP.initialized = True


def _stderr_of(function: Callable[[], object]) -> bytes:
    """Run ``function`` with the process's stderr (file descriptor 2, where Warp's native
    library prints) captured; pass on every line but the missing-driver warning. Returns
    what was captured."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        function()
        return b""
    with tempfile.TemporaryFile() as capture:
        try:
            os.dup2(capture.fileno(), 2)
            function()
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        text = capture.read()
    kept = b"".join(line for line in text.splitlines(keepends=True) if not line.startswith(DRIVER_MISSING))
    if kept:
        os.write(2, kept)  # real errors (an old driver, a failed load) still show
    return text


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
        if count:
            found = f"{count} CUDA device(s) found"
        elif WARP.driver_missing:
            found = f"no NVIDIA CUDA driver found; CUDA needs {GPU_REQUIREMENT}"
        else:
            found = "no CUDA device found"
        raise FitInputError(f"device cuda:{index} is not available ({found})")
    return f"cuda:{index}"
