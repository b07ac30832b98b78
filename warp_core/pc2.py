"""Point Cache 2 (``.pc2``) files, the format Blender's Mesh Cache modifier plays back.

Layout (little-endian): 12 bytes ``b"POINTCACHE2\\0"``, int32 version (1), int32 number of
points, float32 start frame, float32 sample rate, int32 number of samples, then float32
x, y, z for every point of every sample. Pure numpy, no bpy.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .io import atomic_write_bytes

MAGIC = b"POINTCACHE2\0"
VERSION = 1
HEADER = struct.Struct("<12siiffi")


def encode_pc2(samples: np.ndarray, start_frame: float = 0.0, sample_rate: float = 1.0) -> bytes:
    """The bytes of a ``.pc2`` file holding ``samples`` (S, N, 3)."""
    data = np.asarray(samples, dtype=np.float64)
    if data.ndim != 3 or data.shape[2] != 3:
        raise ValueError(f"samples must have shape (samples, points, 3), got {data.shape}")
    if not np.isfinite(data).all():
        raise ValueError("samples contain NaN or infinite coordinates")
    n_samples, n_points = data.shape[:2]
    header = HEADER.pack(MAGIC, VERSION, n_points, float(start_frame), float(sample_rate), n_samples)
    return header + data.astype("<f4").tobytes(order="C")


def write_pc2(
    path: str | os.PathLike,
    samples: np.ndarray,
    start_frame: float = 0.0,
    sample_rate: float = 1.0,
    before_commit: Callable[[], None] | None = None,
) -> None:
    """Write ``samples`` (S, N, 3) to ``path``.

    Written atomically (``warp_core.io``): a reader, a crash or a full disk never sees half
    a cache; the file is read back before it replaces ``path``. ``before_commit()`` runs
    just before that; raising there abandons the write.
    """
    data = encode_pc2(samples, start_frame, sample_rate)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data, before_commit=before_commit)


def read_pc2(path: str | os.PathLike) -> tuple[np.ndarray, float, float]:
    """(samples (S, N, 3) float32, start frame, sample rate) of a ``.pc2`` file."""
    raw = Path(path).read_bytes()
    if len(raw) < HEADER.size:
        raise ValueError(f"{path}: too short for a .pc2 header")
    magic, version, n_points, start, rate, n_samples = HEADER.unpack_from(raw)
    if magic != MAGIC or version != VERSION:
        raise ValueError(f"{path}: not a version 1 .pc2 file")
    expected = HEADER.size + 12 * n_points * n_samples
    if len(raw) != expected:
        raise ValueError(f"{path}: {len(raw)} bytes, expected {expected} for {n_samples} x {n_points} points")
    data = np.frombuffer(raw, dtype="<f4", offset=HEADER.size).reshape(n_samples, n_points, 3)
    return data.copy(), float(start), float(rate)
