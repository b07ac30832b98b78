"""The CG's dot products, summed in one fixed order on every device.

Blender's solver adds a dot product's terms one after the other (``dot_lfvector``). Meshes
of up to ``DOT_CHUNK`` vertices do the same here, on every device, so a float32 rollout
follows Blender's own rounding (a uniformly shrunk 10 x 10 sheet, sensitive from its first
frames, stays within 8e-6 of Blender's motion over 60 frames this way and drifted to 1e-3 in
another order).

On a GPU one thread adding thousands of terms in turn is latency-bound (210 us per dot
product at 65,536 vertices on an H200, against 4.9 us for a block reduction), so larger
meshes take the GPU's order: blocks of ``DOT_TILE`` vertices, each reduced by
``DOT_TILE_THREADS`` threads with Warp tiles, then one block adds the blocks' sums. On CUDA
that runs as tiles; on the CPU ``dot_block_*`` repeat the very same additions (each thread's
registers in turn, a warp's 32 lanes by shuffle-down halving, the warps in turn;
``warp/native/tile_reduce.h``), so the CPU and CUDA agree bit for bit. Padding past the mesh
adds +0.0, as the tiles' zero-filled loads do. Meshes with more than
``DOT_TILE * DOT_TILE_ROW`` vertices sum in chunks of ``DOT_CHUNK`` (``dot_partials`` /
``dot_total``).
"""

import functools
from types import SimpleNamespace

import warp as wp

from .force_kernels import NO_FMA, force_kernels

DOT_CHUNK = 256  # vertices per partial sum in the chunk order (one chunk: Blender's order)
DOT_TILE = 2048  # vertices per block
DOT_TILE_THREADS = 256
DOT_TILE_ROW = 1024  # the second stage's tile: at most this many blocks (2M vertices)
WARP_LANES = 32
BLOCK_REGISTERS = DOT_TILE // DOT_TILE_THREADS  # vertices per thread in a block
ROW_REGISTERS = DOT_TILE_ROW // DOT_TILE_THREADS  # block sums per thread in the second stage


def block_order(vertex_count: int) -> bool:
    """Whether a mesh's dot products take the block order (else chunks: Blender's own
    order up to ``DOT_CHUNK`` vertices)."""
    return vertex_count > DOT_CHUNK and dot_columns(vertex_count, True) <= DOT_TILE_ROW


def dot_columns(vertex_count: int, blocks: bool) -> int:
    """Partial sums per dot product: blocks of DOT_TILE or chunks of DOT_CHUNK vertices."""
    size = DOT_TILE if blocks else DOT_CHUNK
    return (vertex_count + size - 1) // size


@functools.cache
def dot_kernels(dtype) -> SimpleNamespace:
    vec3 = force_kernels(dtype).vec3
    vec_array = wp.array(dtype=vec3)
    row_array = wp.array2d(dtype=dtype)
    int_array = wp.array(dtype=wp.int32)
    # the tiles' views of a batch: (members, N) vertices, (rows, members, blocks) block sums
    member_vec_array = wp.array2d(dtype=vec3)
    member_row_array = wp.array3d(dtype=dtype)

    @wp.func
    def dot3(a: vec3, b: vec3):
        return wp.dot(a, b)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def dot_tile_partials(
        a: vec_array, b: vec_array, row: wp.int32, row_base: int_array, partials: row_array
    ):
        # one block per DOT_TILE vertices (loads past the end give 0)
        block = wp.tid()
        row = row + row_base[0]
        tile_a = wp.tile_load(a, shape=DOT_TILE, offset=block * DOT_TILE)
        tile_b = wp.tile_load(b, shape=DOT_TILE, offset=block * DOT_TILE)
        wp.tile_store(partials[row], wp.tile_sum(wp.tile_map(dot3, tile_a, tile_b)), offset=block)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def dot_tile_total(partials: row_array, row: wp.int32, row_base: int_array, out: wp.array(dtype=dtype)):
        # one block adds the row's block sums
        row = row + row_base[0]
        wp.tile_store(out, wp.tile_sum(wp.tile_load(partials[row], shape=DOT_TILE_ROW)), offset=row)

    # a batch's tiles: the same blocks within each member, the member's row of a 2-d view
    # (its loads past the member's end give 0; a single run keeps the 1-d tiles above, whose
    # loads check one dimension)
    @wp.kernel(module="unique", module_options=NO_FMA)
    def dot_member_tile_partials(
        a: member_vec_array,
        b: member_vec_array,
        row: wp.int32,
        row_base: int_array,
        partials: member_row_array,
    ):
        # one block per DOT_TILE vertices of a member (loads past the member's end give 0)
        m, block = wp.tid()
        row = row + row_base[0]
        tile_a = wp.tile_load(a, shape=(1, DOT_TILE), offset=(m, block * DOT_TILE))
        tile_b = wp.tile_load(b, shape=(1, DOT_TILE), offset=(m, block * DOT_TILE))
        wp.tile_store(partials[row, m], wp.tile_sum(wp.tile_map(dot3, tile_a, tile_b)), offset=block)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def dot_member_tile_total(partials: member_row_array, row: wp.int32, row_base: int_array, out: row_array):
        # one block adds a member's block sums
        m = wp.tid()
        row = row + row_base[0]
        sums = wp.tile_load(partials[row], shape=(1, DOT_TILE_ROW), offset=(m, 0))
        wp.tile_store(out[row], wp.tile_sum(sums), offset=m)

    @wp.func
    def vertex_lane(a: vec_array, b: vec_array, row: int, start: int, count: int, lane: int):
        """What thread ``lane`` of a block holds after summing its registers: the vertices
        start + lane + k * DOT_TILE_THREADS of the block, in turn (+0.0 for padding)."""
        j = start + lane
        acc = dtype(0.0)
        if j < count:
            acc = wp.dot(a[j], b[j])
            valid = wp.min(
                (count - j + DOT_TILE_THREADS - 1) // DOT_TILE_THREADS, DOT_TILE // DOT_TILE_THREADS
            )
            for k in range(1, valid):
                acc = acc + wp.dot(a[j + k * DOT_TILE_THREADS], b[j + k * DOT_TILE_THREADS])
            if valid < BLOCK_REGISTERS:
                acc = acc + dtype(0.0)
        return acc

    @wp.func
    def partial_lane(p: row_array, unused: row_array, row: int, start: int, count: int, lane: int):
        """The same for the second stage: the row's block sums start + lane + k *
        DOT_TILE_THREADS (a member's, which end at ``count``)."""
        j = start + lane
        acc = dtype(0.0)
        if j < count:
            acc = p[row, j]
            valid = wp.min(
                (count - j + DOT_TILE_THREADS - 1) // DOT_TILE_THREADS, DOT_TILE_ROW // DOT_TILE_THREADS
            )
            for k in range(1, valid):
                acc = acc + p[row, j + k * DOT_TILE_THREADS]
            if valid < ROW_REGISTERS:
                acc = acc + dtype(0.0)
        return acc

    vertex_block = _block_sum(vertex_lane, vec_array, vec_array, dtype)
    partial_block = _block_sum(partial_lane, row_array, row_array, dtype)

    @wp.func
    def member_span(column: int, member_vertices: int, size: int):
        # a partial sum's member and its first vertex: each member has its own columns of
        # ``size`` vertices
        per_member = (member_vertices + size - 1) // size
        m = column // per_member
        return m, m * member_vertices + (column - m * per_member) * size

    @wp.kernel(module="unique", module_options=NO_FMA)
    def dot_block_partials(
        a: vec_array,
        b: vec_array,
        row: wp.int32,
        row_base: int_array,
        member_vertices: wp.int32,
        partials: row_array,
    ):
        # dot_tile_partials' additions, one thread per block of a member
        column = wp.tid()
        m, start = member_span(column, member_vertices, DOT_TILE)
        row = row + row_base[0]
        partials[row, column] = vertex_block(a, b, row, start, (m + 1) * member_vertices)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def dot_block_total(partials: row_array, row: wp.int32, row_base: int_array, out: row_array):
        m = wp.tid()
        blocks = partials.shape[1] // out.shape[1]
        row = row + row_base[0]
        out[row, m] = partial_block(partials, partials, row, m * blocks, (m + 1) * blocks)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def dot_partials(
        a: vec_array,
        b: vec_array,
        row: wp.int32,
        row_base: int_array,
        member_vertices: wp.int32,
        partials: row_array,
    ):
        # chunks: each thread sums one contiguous chunk of a member in turn
        column = wp.tid()
        m, begin = member_span(column, member_vertices, DOT_CHUNK)
        end = wp.min(begin + DOT_CHUNK, (m + 1) * member_vertices)
        row = row + row_base[0]
        acc = dtype(0.0)
        for i in range(begin, end):
            acc = acc + wp.dot(a[i], b[i])
        partials[row, column] = acc

    @wp.kernel(module="unique", module_options=NO_FMA)
    def dot_total(partials: row_array, row: wp.int32, row_base: int_array, out: row_array):
        m = wp.tid()
        chunks = partials.shape[1] // out.shape[1]
        row = row + row_base[0]
        acc = dtype(0.0)
        for c in range(m * chunks, (m + 1) * chunks):
            acc = acc + partials[row, c]
        out[row, m] = acc

    return SimpleNamespace(
        dot_tile_partials=dot_tile_partials,
        dot_tile_total=dot_tile_total,
        dot_member_tile_partials=dot_member_tile_partials,
        dot_member_tile_total=dot_member_tile_total,
        dot_block_partials=dot_block_partials,
        dot_block_total=dot_block_total,
        dot_partials=dot_partials,
        dot_total=dot_total,
    )


def _block_sum(lane_value, x_type, y_type, dtype):
    """A block's sum as Warp's tile_sum adds it on CUDA: each warp's 32 lanes by shuffle-down
    halving (lane l adds lane l + 16, then l + 8, ... 1: lane 0 holds the warp's sum), then
    the warps in turn. ``lane_value(x, y, row, start, count, lane)`` is a thread's own sum."""

    @wp.func
    def half16(x: x_type, y: y_type, row: int, start: int, count: int, lane: int):
        return lane_value(x, y, row, start, count, lane) + lane_value(x, y, row, start, count, lane + 16)

    @wp.func
    def half8(x: x_type, y: y_type, row: int, start: int, count: int, lane: int):
        return half16(x, y, row, start, count, lane) + half16(x, y, row, start, count, lane + 8)

    @wp.func
    def half4(x: x_type, y: y_type, row: int, start: int, count: int, lane: int):
        return half8(x, y, row, start, count, lane) + half8(x, y, row, start, count, lane + 4)

    @wp.func
    def half2(x: x_type, y: y_type, row: int, start: int, count: int, lane: int):
        return half4(x, y, row, start, count, lane) + half4(x, y, row, start, count, lane + 2)

    @wp.func
    def warp_sum(x: x_type, y: y_type, row: int, start: int, count: int, first_lane: int):
        acc = dtype(0.0)  # a warp of padding only: +0.0, as its shuffles of zeros give
        if start + first_lane < count:
            acc = half2(x, y, row, start, count, first_lane) + half2(x, y, row, start, count, first_lane + 1)
        return acc

    @wp.func
    def block_sum(x: x_type, y: y_type, row: int, start: int, count: int):
        acc = warp_sum(x, y, row, start, count, 0)
        for w in range(1, DOT_TILE_THREADS // WARP_LANES):
            acc = acc + warp_sum(x, y, row, start, count, w * WARP_LANES)
        return acc

    return block_sum


def launch_dot(
    kernels,
    a: wp.array,
    b: wp.array,
    rows: tuple[int, wp.array],
    partials: wp.array,
    out: wp.array,
    mode: str,
    members: int = 1,
) -> None:
    """out[row * members + m] = a . b over member m's vertices (the members lie one after
    the other in ``a`` and ``b``; a single run is member 0) through ``partials[row]``, row =
    ``rows[0]`` + ``rows[1][0]`` (a device value, so one captured loop body serves every
    iteration); ``kernels`` is ``dot_kernels(dtype)`` and ``mode`` "tiles" (the block order
    on CUDA), "blocks" (the same additions, one thread per block) or "chunks"."""
    device = a.device
    columns = partials.shape[1]
    row, row_base = rows
    if mode == "tiles" and members == 1:
        launch = {"block_dim": DOT_TILE_THREADS, "device": device}
        stage_1, stage_2 = kernels.dot_tile_partials, kernels.dot_tile_total
        wp.launch_tiled(stage_1, dim=columns, inputs=[a, b, row, row_base], outputs=[partials], **launch)
        wp.launch_tiled(stage_2, dim=1, inputs=[partials, row, row_base], outputs=[out], **launch)
        return
    member_vertices = a.shape[0] // members
    out_rows = out.reshape((out.shape[0] // members, members))
    if mode == "tiles":
        launch = {"block_dim": DOT_TILE_THREADS, "device": device}
        views = [x.reshape((members, member_vertices)) for x in (a, b)]
        member_partials = partials.reshape((partials.shape[0], members, columns // members))
        stage_1, stage_2 = kernels.dot_member_tile_partials, kernels.dot_member_tile_total
        dim = (members, columns // members)
        wp.launch_tiled(stage_1, dim=dim, inputs=[*views, row, row_base], outputs=[member_partials], **launch)
        wp.launch_tiled(
            stage_2, dim=members, inputs=[member_partials, row, row_base], outputs=[out_rows], **launch
        )
        return
    if mode == "blocks":
        stage_1, stage_2 = kernels.dot_block_partials, kernels.dot_block_total
    else:
        stage_1, stage_2 = kernels.dot_partials, kernels.dot_total
    inputs = [a, b, row, row_base, member_vertices]
    wp.launch(stage_1, dim=columns, device=device, inputs=inputs, outputs=[partials])
    wp.launch(stage_2, dim=members, device=device, inputs=[partials, row, row_base], outputs=[out_rows])
