"""The CG's fixed-order dot products (``dots.py``) on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from warp_core.models.blender_cloth.dots import (
    DOT_CHUNK,
    DOT_TILE,
    DOT_TILE_ROW,
    DOT_TILE_THREADS,
    WARP_LANES,
    block_order,
    dot_columns,
    dot_kernels,
    launch_dot,
)
from warp_core.models.blender_cloth.force_kernels import force_kernels


def _block_order(terms: np.ndarray, tile: int) -> np.generic:
    """The order Warp's tile_sum adds a tile on CUDA (``tile_reduce.h``), written in numpy:
    thread t adds elements t, t + 256, ... in turn; in each warp lane l adds lane l + 16,
    then l + 8, ..., 1; thread 0 adds the warps in turn. Padding is +0.0."""
    padded = np.zeros(-(-len(terms) // tile) * tile, dtype=terms.dtype)
    padded[: len(terms)] = terms
    sums = []
    for block in padded.reshape(-1, tile):
        threads = block.reshape(-1, DOT_TILE_THREADS)  # row k: every thread's register k
        acc = threads[0].copy()
        for k in range(1, len(threads)):
            acc = acc + threads[k]
        warps = []
        for lanes in acc.reshape(-1, WARP_LANES):
            lanes = lanes.copy()
            offset = WARP_LANES // 2
            while offset:
                lanes[:offset] = lanes[:offset] + lanes[offset : 2 * offset]
                offset //= 2
            warps.append(lanes[0])
        total = warps[0]
        for w in warps[1:]:
            total = total + w
        sums.append(total)
    return np.array(sums, dtype=terms.dtype)


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 36, 300, DOT_TILE, DOT_TILE + 1, 5000])
def test_dot_products_sum_in_the_block_order(n: int, precision: str) -> None:
    dtype = wp.float32 if precision == "float32" else wp.float64
    np_float = np.float32 if precision == "float32" else np.float64
    vec3 = force_kernels(dtype).vec3
    kernels = dot_kernels(dtype)
    rng = np.random.default_rng(n)
    a_np = rng.standard_normal((n, 3)).astype(np_float)
    b_np = rng.standard_normal((n, 3)).astype(np_float)
    b_np[::7] *= -1e-30  # tiny and negative terms: the order shows in the last bits
    # each term as the kernels form it (no FMA): a0 b0 + a1 b1 + a2 b2
    terms = (a_np[:, 0] * b_np[:, 0] + a_np[:, 1] * b_np[:, 1]) + a_np[:, 2] * b_np[:, 2]
    expected = _block_order(_block_order(terms, DOT_TILE), DOT_TILE_ROW)[0]
    results = {}
    for mode in ("blocks", "tiles", "chunks"):
        a = wp.array(a_np, dtype=vec3, requires_grad=True)
        b = wp.array(b_np, dtype=vec3, requires_grad=True)
        partials = wp.zeros((3, dot_columns(n, mode != "chunks")), dtype=dtype, requires_grad=True)
        out = wp.zeros(3, dtype=dtype, requires_grad=True)
        tape = wp.Tape()
        row_base = wp.array([1], dtype=wp.int32)  # the row's device part, as in a captured loop
        with tape:
            launch_dot(kernels, a, b, (0, row_base), partials, out, mode)
        results[mode] = out.numpy()[1]
        tape.backward(grads={out: wp.array(np.array([0.0, 1.0, 0.0], dtype=np_float), dtype=dtype)})
        # d (a . b) / da = b exactly: every path to an element multiplies by 1
        np.testing.assert_array_equal(a.grad.numpy(), b_np)
        np.testing.assert_array_equal(b.grad.numpy(), a_np)
    assert results["blocks"] == expected  # bit for bit: CUDA's tiles add in this order
    if n <= DOT_CHUNK:
        in_turn = terms[0]  # Blender's dot_lfvector: 0 + t0 + t1 + ... (one chunk here)
        for t in terms[1:]:
            in_turn = in_turn + t
        assert results["chunks"] == in_turn
    exact = float(np.sum(terms.astype(np.float64)))
    rtol = 1e-5 if precision == "float32" else 1e-12
    for mode, value in results.items():
        assert abs(float(value) - exact) <= rtol * np.abs(terms).sum(), mode


def test_small_meshes_keep_blenders_order_and_large_ones_take_blocks() -> None:
    assert not block_order(DOT_CHUNK)
    assert block_order(DOT_CHUNK + 1)
    assert block_order(DOT_TILE * DOT_TILE_ROW)
    assert not block_order(DOT_TILE * DOT_TILE_ROW + 1)  # past the second stage's tile: chunks
