"""Dot products of float64 vector arrays into a small device array of scalars, for kernels
that read them there (``adjoint_device``'s loop, ``adjoint_solve``'s start): the sums stay on
the device, and nothing is read back to take them.

On CUDA each block of ``DOT_TILE`` nodes is summed by a tile, then the blocks' sums by one
more; on the CPU one thread adds the terms in turn.
"""

from __future__ import annotations

import warp as wp

__all__ = ["DOT_TILE", "Dots"]

DOT_TILE = 1024  # nodes per block of a dot product's first stage
DOT_ROW = 1024  # blocks the second stage adds: bodies of up to a million nodes
DOT_THREADS = 256

Vectors = wp.array(dtype=wp.vec3d)
Scalars = wp.array(dtype=wp.float64)


@wp.func
def _dot3(a: wp.vec3d, b: wp.vec3d):
    return wp.dot(a, b)


@wp.kernel
def _dot_blocks(a: Vectors, b: Vectors, slot: int, partials: wp.array2d(dtype=wp.float64)):
    block = wp.tid()
    tile_a = wp.tile_load(a, shape=DOT_TILE, offset=block * DOT_TILE)  # zeros past the end
    tile_b = wp.tile_load(b, shape=DOT_TILE, offset=block * DOT_TILE)
    wp.tile_store(partials[slot], wp.tile_sum(wp.tile_map(_dot3, tile_a, tile_b)), offset=block)


@wp.kernel
def _dot_total(partials: wp.array2d(dtype=wp.float64), slot: int, values: Scalars):
    wp.tile_store(values, wp.tile_sum(wp.tile_load(partials[slot], shape=DOT_ROW)), offset=slot)


@wp.kernel
def _dot_in_turn(a: Vectors, b: Vectors, slot: int, values: Scalars):
    # the CPU's: one thread adds every term (a CPU runs a launch's threads in turn anyway)
    total = wp.float64(0.0)
    for i in range(a.shape[0]):
        total = total + wp.dot(a[i], b[i])
    values[slot] = total


class Dots:
    """``a . b`` of float64 vector arrays of ``length`` entries into ``values[slot]``, on the
    device: made by whoever keeps scalars there (the solve, ``adjoint_device``'s loop), whose
    kernels read ``values``. ``tiles``: by blocks of tiles (None: on CUDA); else one thread
    adds the terms in turn, the CPU's way (its tiles, padded to ``DOT_TILE``, made the backward
    pass of a 27-node body 1.8 times as long)."""

    def __init__(self, length: int, slots: int, device: wp.Device | str, tiles: bool | None = None) -> None:
        self.blocks = max(1, -(-length // DOT_TILE))
        if self.blocks > DOT_ROW:
            raise ValueError(f"dot products take at most {DOT_TILE * DOT_ROW} entries, got {length}")
        self.device = wp.get_device(device)
        self.tiles = self.device.is_cuda if tiles is None else tiles
        self.partials = wp.zeros((slots, self.blocks), dtype=wp.float64, device=device)
        self.values = wp.zeros(slots, dtype=wp.float64, device=device)

    def __call__(self, a: wp.array, b: wp.array, slot: int) -> None:
        if not self.tiles:
            wp.launch(_dot_in_turn, dim=1, inputs=[a, b, slot, self.values], device=self.device)
            return
        launch = {"block_dim": DOT_THREADS, "device": self.device}
        wp.launch_tiled(_dot_blocks, dim=self.blocks, inputs=[a, b, slot, self.partials], **launch)
        wp.launch_tiled(_dot_total, dim=1, inputs=[self.partials, slot, self.values], **launch)
