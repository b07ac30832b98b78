"""Dot products of float64 vector arrays into slots of a small device array, for the
soft-body adjoint's kernels that read them there (``adjoint_solve``, ``adjoint_device``): on
CUDA each block of ``DOT_TILE`` nodes summed by a tile, then the blocks' sums by one more; on
the CPU one thread in turn. A pair ``a . b`` and ``a . c`` is taken in the same two launches,
each sum in the order it has alone (so the same bits).
"""

from __future__ import annotations

import warp as wp

__all__ = ["DOT_TILE", "Dots"]

DOT_TILE = 1024  # nodes per block of a dot product's first stage
DOT_ROW = 1024  # blocks the second stage adds: bodies of up to a million nodes
DOT_THREADS = 256

Vectors = wp.array(dtype=wp.vec3d)
Scalars = wp.array(dtype=wp.float64)
Partials = wp.array2d(dtype=wp.float64)


@wp.func
def _dot3(a: wp.vec3d, b: wp.vec3d):
    return wp.dot(a, b)


@wp.kernel
def _dot_blocks(a: Vectors, b: Vectors, slot: int, partials: Partials):
    block = wp.tid()
    tile_a = wp.tile_load(a, shape=DOT_TILE, offset=block * DOT_TILE)  # zeros past the end
    tile_b = wp.tile_load(b, shape=DOT_TILE, offset=block * DOT_TILE)
    wp.tile_store(partials[slot], wp.tile_sum(wp.tile_map(_dot3, tile_a, tile_b)), offset=block)


@wp.kernel
def _dot_total(partials: Partials, slot: int, values: Scalars):
    wp.tile_store(values, wp.tile_sum(wp.tile_load(partials[slot], shape=DOT_ROW)), offset=slot)


@wp.kernel
def _pair_blocks(a: Vectors, b: Vectors, c: Vectors, slot_b: int, slot_c: int, partials: Partials):
    block = wp.tid()
    tile_a = wp.tile_load(a, shape=DOT_TILE, offset=block * DOT_TILE)
    tile_b = wp.tile_load(b, shape=DOT_TILE, offset=block * DOT_TILE)
    tile_c = wp.tile_load(c, shape=DOT_TILE, offset=block * DOT_TILE)
    wp.tile_store(partials[slot_b], wp.tile_sum(wp.tile_map(_dot3, tile_a, tile_b)), offset=block)
    wp.tile_store(partials[slot_c], wp.tile_sum(wp.tile_map(_dot3, tile_a, tile_c)), offset=block)


@wp.kernel
def _pair_total(partials: Partials, slot_b: int, slot_c: int, values: Scalars):
    wp.tile_store(values, wp.tile_sum(wp.tile_load(partials[slot_b], shape=DOT_ROW)), offset=slot_b)
    wp.tile_store(values, wp.tile_sum(wp.tile_load(partials[slot_c], shape=DOT_ROW)), offset=slot_c)


@wp.kernel
def _dot_in_turn(a: Vectors, b: Vectors, c: Vectors, slot_b: int, slot_c: int, values: Scalars):
    # the CPU's: one thread adds every term (a CPU runs a launch's threads in turn anyway);
    # ``slot_c`` < 0: ``a . b`` alone
    total_b, total_c = wp.float64(0.0), wp.float64(0.0)
    for i in range(a.shape[0]):
        total_b = total_b + wp.dot(a[i], b[i])
        if slot_c >= 0:
            total_c = total_c + wp.dot(a[i], c[i])
    values[slot_b] = total_b
    if slot_c >= 0:
        values[slot_c] = total_c


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
            wp.launch(_dot_in_turn, dim=1, inputs=[a, b, b, slot, -1, self.values], device=self.device)
            return
        launch = {"block_dim": DOT_THREADS, "device": self.device}
        wp.launch_tiled(_dot_blocks, dim=self.blocks, inputs=[a, b, slot, self.partials], **launch)
        wp.launch_tiled(_dot_total, dim=1, inputs=[self.partials, slot, self.values], **launch)

    def pair(self, a: wp.array, b: wp.array, slot_b: int, c: wp.array, slot_c: int) -> None:
        """``a . b`` into ``values[slot_b]`` and ``a . c`` into ``values[slot_c]``."""
        if not self.tiles:
            inputs = [a, b, c, slot_b, slot_c, self.values]
            wp.launch(_dot_in_turn, dim=1, inputs=inputs, device=self.device)
            return
        launch = {"block_dim": DOT_THREADS, "device": self.device}
        inputs = [a, b, c, slot_b, slot_c, self.partials]
        wp.launch_tiled(_pair_blocks, dim=self.blocks, inputs=inputs, **launch)
        wp.launch_tiled(_pair_total, dim=1, inputs=[self.partials, slot_b, slot_c, self.values], **launch)
