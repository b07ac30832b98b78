"""The candidate pairs of the cloth's self-collision, found through a hashed uniform grid
rebuilt on the device every substep (Blender's ``BLI_bvhtree_overlap_self``, which returns
every pair of triangles whose grown 26-sided bounding volumes overlap).

The grid's cell is the widest grown triangle box of the substep, so the box of every
partner of a triangle has its centre within half a cell of the triangle's own box: each
triangle is filed once, at its box centre, and looks through the at most 4 x 4 x 4 cells
around its box. Cells are hashed into buckets (a bucket may hold several cells; each
triangle keeps its cell, so a bucket reached from two cells yields each triangle once).

A bucket's triangles come out of integer atomics in whatever order the threads ran, so
each triangle's partner list is sorted afterwards: the list is then the same on every
device and in every run, in triangle order as a brute-force search gives it. Only integer
atomics are used; the widest box is a max, taken in two deterministic passes.
"""

import functools
from types import SimpleNamespace

import warp as wp

from .collision_kernels import KDOP_AXES
from .force_kernels import NO_FMA

BLOCK = 256  # triangles or buckets per thread of the two-pass reductions and scans
CELL_LIMIT = 1.0e9  # cell coordinates are clamped here (and a NaN box filed at the origin)


def bucket_count(triangles: int) -> int:
    """Buckets for ``triangles``: a power of two of at least twice as many (few shared)."""
    return 1 << max(4, (2 * max(triangles, 1) - 1).bit_length())


@functools.cache
def self_collision_grid(dtype) -> SimpleNamespace:
    @wp.kernel(module="unique", module_options=NO_FMA)
    def widest_in_block(kdop: wp.array2d(dtype=dtype), widest: wp.array(dtype=dtype)):
        # first pass of the cell size: the widest grown box side over a block of triangles
        b = wp.tid()
        m = dtype(0.0)
        for t in range(b * BLOCK, wp.min(b * BLOCK + BLOCK, kdop.shape[0])):
            for a in range(3):
                m = wp.max(m, kdop[t, 2 * a + 1] - kdop[t, 2 * a])
        widest[b] = m

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cell_size(widest: wp.array(dtype=dtype), cell: wp.array(dtype=dtype)):
        # second pass; a tiny floor keeps a collapsed cloth's cells finite
        m = dtype(1.0e-6)
        for b in range(widest.shape[0]):
            m = wp.max(m, widest[b])
        cell[0] = m

    @wp.func
    def cell_of(x: dtype, size: dtype):
        c = wp.floor(x / size)
        if not (c >= dtype(-CELL_LIMIT) and c <= dtype(CELL_LIMIT)):
            c = dtype(0.0)
        return int(c)

    @wp.func
    def bucket_of(c: wp.vec3i, buckets: int):
        h = wp.uint32(c[0]) * wp.uint32(73856093)
        h = h ^ (wp.uint32(c[1]) * wp.uint32(19349663))
        h = h ^ (wp.uint32(c[2]) * wp.uint32(83492791))
        return int(h & wp.uint32(buckets - 1))

    @wp.func
    def same_cell(a: wp.vec3i, b: wp.vec3i):
        return a[0] == b[0] and a[1] == b[1] and a[2] == b[2]

    @wp.kernel(module="unique", module_options=NO_FMA)
    def clear_buckets(counts: wp.array(dtype=wp.int32), fill: wp.array(dtype=wp.int32)):
        i = wp.tid()
        counts[i] = 0
        fill[i] = 0

    @wp.kernel(module="unique", module_options=NO_FMA)
    def file_triangles(
        kdop: wp.array2d(dtype=dtype),
        tri_excluded: wp.array(dtype=wp.int32),
        cell: wp.array(dtype=dtype),
        tri_cell: wp.array(dtype=wp.vec3i),
        tri_bucket: wp.array(dtype=wp.int32),
        counts: wp.array(dtype=wp.int32),
    ):
        # each triangle's cell at its box centre (excluded triangles are nobody's partner)
        t = wp.tid()
        if tri_excluded[t] == 0:
            size = cell[0]
            c = wp.vec3i()
            for a in range(3):
                c[a] = cell_of((kdop[t, 2 * a] + kdop[t, 2 * a + 1]) * dtype(0.5), size)
            b = bucket_of(c, counts.shape[0])
            tri_cell[t] = c
            tri_bucket[t] = b
            wp.atomic_add(counts, b, 1)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def block_totals(counts: wp.array(dtype=wp.int32), totals: wp.array(dtype=wp.int32)):
        b = wp.tid()
        s = int(0)  # noqa: UP018 (a dynamic Warp variable)
        for i in range(b * BLOCK, wp.min(b * BLOCK + BLOCK, counts.shape[0])):
            s += counts[i]
        totals[b] = s

    @wp.kernel(module="unique", module_options=NO_FMA)
    def bucket_starts(
        counts: wp.array(dtype=wp.int32), totals: wp.array(dtype=wp.int32), starts: wp.array(dtype=wp.int32)
    ):
        # exclusive scan of the bucket sizes: the blocks before, then within the block
        b = wp.tid()
        s = int(0)  # noqa: UP018 (a dynamic Warp variable)
        for k in range(b):
            s += totals[k]
        for i in range(b * BLOCK, wp.min(b * BLOCK + BLOCK, counts.shape[0])):
            starts[i] = s
            s += counts[i]

    @wp.kernel(module="unique", module_options=NO_FMA)
    def scatter(
        tri_excluded: wp.array(dtype=wp.int32),
        tri_bucket: wp.array(dtype=wp.int32),
        starts: wp.array(dtype=wp.int32),
        fill: wp.array(dtype=wp.int32),
        bucket_tris: wp.array(dtype=wp.int32),
    ):
        t = wp.tid()
        if tri_excluded[t] == 0:
            b = tri_bucket[t]
            bucket_tris[starts[b] + wp.atomic_add(fill, b, 1)] = t

    @wp.func
    def kdops_apart(kdop: wp.array2d(dtype=dtype), i: wp.int32, j: wp.int32):
        apart = bool(False)  # noqa: UP018 (a dynamic Warp variable)
        for a in range(KDOP_AXES):
            if kdop[i, 2 * a] > kdop[j, 2 * a + 1] or kdop[j, 2 * a] > kdop[i, 2 * a + 1]:
                apart = True
                break
        return apart

    @wp.func
    def sewn(
        p: wp.int32,
        q: wp.int32,
        sew_offsets: wp.array(dtype=wp.int32),
        sew_partners: wp.array(dtype=wp.int32),
    ):
        found = bool(False)  # noqa: UP018 (a dynamic Warp variable)
        for e in range(sew_offsets[p], sew_offsets[p + 1]):
            if sew_partners[e] == q:
                found = True
        return found

    @wp.func
    def pair_allowed(
        a: wp.vec3i,
        b: wp.vec3i,
        sew_offsets: wp.array(dtype=wp.int32),
        sew_partners: wp.array(dtype=wp.int32),
    ):
        # cloth_bvh_selfcollision_is_active's neighbour test: no shared vertex, no sewing edge
        ok = bool(True)  # noqa: UP018 (a dynamic Warp variable)
        for i in range(3):
            for j in range(3):
                if a[i] == b[j] or sewn(a[i], b[j], sew_offsets, sew_partners):
                    ok = False
        return ok

    @wp.kernel(module="unique", module_options=NO_FMA)
    def candidates(
        tris: wp.array(dtype=wp.vec3i),
        tri_excluded: wp.array(dtype=wp.int32),
        tri_pinned: wp.array(dtype=wp.int32),
        sew_offsets: wp.array(dtype=wp.int32),
        sew_partners: wp.array(dtype=wp.int32),
        kdop: wp.array2d(dtype=dtype),
        cell: wp.array(dtype=dtype),
        tri_cell: wp.array(dtype=wp.vec3i),
        starts: wp.array(dtype=wp.int32),
        counts: wp.array(dtype=wp.int32),
        bucket_tris: wp.array(dtype=wp.int32),
        slots: wp.int32,
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        candidate_lower: wp.array(dtype=wp.int32),
        overflow: wp.array(dtype=wp.int32),
    ):
        # every partner of triangle t, then sorted into triangle order
        t = wp.tid()
        c = int(0)  # noqa: UP018 (a dynamic Warp variable)
        if tri_excluded[t] == 0:
            size = cell[0]
            lo = wp.vec3i()
            hi = wp.vec3i()
            for a in range(3):
                # partners' centres lie within half a cell of t's box; the margin covers
                # the rounding of the centres and of this bound
                reach = size * dtype(0.51) + dtype(1.0e-5) * wp.max(
                    wp.abs(kdop[t, 2 * a]), wp.abs(kdop[t, 2 * a + 1])
                )
                lo[a] = cell_of(kdop[t, 2 * a] - reach, size)
                hi[a] = cell_of(kdop[t, 2 * a + 1] + reach, size)
            for x in range(lo[0], hi[0] + 1):
                for y in range(lo[1], hi[1] + 1):
                    for z in range(lo[2], hi[2] + 1):
                        here = wp.vec3i(x, y, z)
                        b = bucket_of(here, counts.shape[0])
                        for e in range(starts[b], starts[b] + counts[b]):
                            j = bucket_tris[e]
                            if j == t or not same_cell(tri_cell[j], here):
                                continue
                            if tri_pinned[t] != 0 and tri_pinned[j] != 0:
                                continue
                            if kdops_apart(kdop, t, j):
                                continue
                            if pair_allowed(tris[t], tris[j], sew_offsets, sew_partners):
                                if c < slots:
                                    candidate[t, c] = j
                                else:
                                    overflow[0] = 1
                                c += 1
        c = wp.min(c, slots)
        # Shell sort (Ciura's gaps): the lists come in runs of cells, a few hundred long
        for g in range(6):
            gap = 1
            if g == 0:
                gap = 132
            elif g == 1:
                gap = 57
            elif g == 2:
                gap = 23
            elif g == 3:
                gap = 10
            elif g == 4:
                gap = 4
            for i in range(gap, c):
                v = candidate[t, i]
                k = i
                while k >= gap and candidate[t, k - gap] > v:
                    candidate[t, k] = candidate[t, k - gap]
                    k -= gap
                candidate[t, k] = v
        lower = int(0)  # noqa: UP018 (a dynamic Warp variable)
        for i in range(c):
            if candidate[t, i] < t:
                lower += 1
        candidate_count[t] = c
        candidate_lower[t] = lower

    return SimpleNamespace(
        widest_in_block=widest_in_block,
        cell_size=cell_size,
        clear_buckets=clear_buckets,
        file_triangles=file_triangles,
        block_totals=block_totals,
        bucket_starts=bucket_starts,
        scatter=scatter,
        candidates=candidates,
    )
