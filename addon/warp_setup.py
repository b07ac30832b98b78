"""Warp on the Blender side: where its kernel cache lives, and the device a fit runs on.

Device "AUTO" chooses by the cloth's size (``warp_core.devices``: small cloths fit faster on
the CPU, from the crossover table ``assets/device_crossover.json``); this side adds which
CUDA devices Warp finds here and whether an NVIDIA driver was found at all.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import bpy

from ..warp_core.devices import CrossoverTable, DeviceChoice, DeviceError, cuda_names
from ..warp_core.devices import choose_device as core_choose_device
from .errors import FitInputError
from .extension import EXTENSION_PACKAGE

# What Warp's native library prints when it finds no NVIDIA driver: on a machine without
# an NVIDIA GPU that is the normal case, and the fit runs on the CPU.
DRIVER_MISSING = b"Warp CUDA warning: Could not find or load the NVIDIA CUDA driver"


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


def cuda_device_names() -> list[str]:
    """The name of each CUDA device Warp sees, in alias order (``cuda:0`` first)."""
    configure_warp()
    return cuda_names()


def choose_device(
    requested: str,
    vertex_count: int | None,
    *,
    cuda_names: Sequence[str] | None = None,
    table: CrossoverTable | None = None,
    precision: str = "float64",
) -> DeviceChoice:
    """:func:`warp_core.devices.choose_device` with the CUDA devices Warp sees here (unless
    ``cuda_names`` are given) and a missing device as the add-on's input error."""
    driver_missing = False
    if cuda_names is None:
        cuda_names = cuda_device_names()
        driver_missing = WARP.driver_missing
    try:
        return core_choose_device(
            requested,
            vertex_count,
            cuda_names=cuda_names,
            table=table,
            precision=precision,
            driver_missing=driver_missing,
        )
    except DeviceError as e:
        raise FitInputError(str(e)) from None


def resolve_device(name: str, vertex_count: int | None = None, precision: str = "float64") -> str:
    """The Warp alias a fit runs on (see :func:`choose_device`): "AUTO" without a vertex
    count is the first CUDA device, else "cpu"; "cuda"/"cuda:N" are checked."""
    return choose_device(name, vertex_count, precision=precision).device
