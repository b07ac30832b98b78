"""Blender's filtered conjugate gradients on one substep's assembled system: x0 = 0, stop
when r.r <= 1e-4 |S b|^2 or after 100 iterations (``schedule.py``), every iteration a fixed
sequence of launches (``solver_kernels``, dot products in ``dots``). Outside a graph the host
checks the device's convergence flag; in a captured graph the iterations run while the CG is
active: a loop on the CPU, blocks of iterations behind conditional nodes on CUDA."""

from __future__ import annotations

from dataclasses import dataclass

import warp as wp

from .arrays import ClothArrays
from .buffers import SubstepBuffers
from .dots import block_order, dot_columns, dot_kernels, launch_dot
from .schedule import CG_BLOCK_BOUNDS, CG_MAX_ITERATIONS, CG_TOLERANCE, conditional_nodes
from .solver_kernels import solver_kernels


@dataclass(frozen=True)
class CGControl:
    """How the CG loop decides when to stop.

    ``frozen_count >= 0``: run exactly that many iterations, with no host checks.
    ``frozen_count <= -2``: run ``-2 - frozen_count`` iterations, and more only while the
    residual is still 10 times above Blender's tolerance. Otherwise (-1) stop on Blender's
    criterion, reading the device's convergence flag every ``check_every`` iterations.
    ``in_graph``: no host checks, the count taken from ``SubstepBuffers.frozen`` as the
    caller set it, so the launches can be captured once into a graph: the iterations run
    only while the CG is still active, on the CPU in a loop of two per turn, on CUDA in
    blocks (``CG_BLOCK_BOUNDS``; iterations past convergence within a turn or block are
    masked no-ops); with per-iteration buffers (a backward pass follows)
    ``graph_iterations`` run, masked past the count.
    """

    frozen_count: int = -1
    check_every: int = 1
    in_graph: bool = False
    # in a graph without a loop or blocks: how many iterations it launches (masked past
    # ``SubstepBuffers.frozen``); a backward pass captures one graph per needed length
    graph_iterations: int = CG_MAX_ITERATIONS
    tolerance: float = CG_TOLERANCE  # r.r <= tolerance |S b|^2 ends the CG (-1 and -2 - n)


CG_UNTIL_CONVERGED = CGControl()
# Blender's stopping test, checked after every iteration


class ConjugateGradients:
    """The CG solves of one mesh (``arrays``) on its device."""

    def __init__(self, arrays: ClothArrays) -> None:
        self.arrays = arrays
        self.kernels = solver_kernels(arrays.dtype, arrays.members > 1)
        self.dot_kernels = dot_kernels(arrays.dtype)
        # the iteration index's device part outside a captured CG loop (always 0)
        self.no_offset = wp.zeros(1, dtype=wp.int32, device=arrays.device)
        # how the dot products run (``dots.launch_dot``): Blender's order on small meshes,
        # else the block order, as tiles on CUDA
        self.dot_mode = "chunks"
        if block_order(arrays.member_vertices):
            self.dot_mode = "tiles" if wp.get_device(arrays.device).is_cuda else "blocks"

    @property
    def dot_columns(self) -> int:
        """Partial sums per dot product: each member's blocks or chunks."""
        a = self.arrays
        return a.members * dot_columns(a.member_vertices, self.dot_mode != "chunks")

    def solve(self, buf: SubstepBuffers, cg: CGControl) -> int:
        """Blender's filtered CG on the assembled system; returns the iteration launches."""
        a = self.arrays
        k_ = self.kernels
        d = a.device
        n = a.vertex_count
        buf.active.zero_()
        if buf.any_active is not buf.active:
            buf.any_active.zero_()
        wp.launch(
            k_.cg_init,
            dim=n,
            device=d,
            inputs=[buf.rhs, a.pinned],
            outputs=[buf.residual[0], buf.direction[0], buf.dv[0]],
        )
        self.dot(buf.residual[0], buf.residual[0], 0, buf.delta_partials, buf.delta)
        if not cg.in_graph:
            buf.frozen.fill_(cg.frozen_count)
        wp.launch(
            k_.cg_start,
            dim=a.members,
            device=d,
            inputs=[buf.delta, buf.frozen],
            outputs=[buf.active, buf.any_active],
        )
        frozen_count = cg.frozen_count
        if cg.in_graph and buf.ping_pong and conditional_nodes(d):
            # captured: iterations only while the CG is active, in a loop on the CPU (cheap to
            # capture), in blocks on CUDA (measured there); both end on an even count
            if wp.get_device(d).is_cpu:
                self._graph_loop(buf, cg.tolerance)
            else:
                self._graph_blocks(buf, 0, cg.tolerance)
            return CG_BLOCK_BOUNDS[-1]
        iterations = frozen_count if frozen_count >= 0 and not cg.in_graph else cg.graph_iterations
        launched = 0
        for k in range(iterations):
            self._iteration(buf, k, cg.tolerance)
            launched = k + 1
            if (
                frozen_count < 0
                and not cg.in_graph
                and launched % cg.check_every == 0
                and not int(buf.any_active.numpy()[launched])
            ):
                break
        return launched

    def _graph_blocks(self, buf: SubstepBuffers, block: int, tolerance: float = CG_TOLERANCE) -> None:
        """Iterations ``CG_BLOCK_BOUNDS[block]`` up to the next bound, then the next block
        inside a conditional node that runs only if the CG is still active there. Past
        convergence an iteration changes nothing (it is masked), so skipping it is exact;
        the bounds are even, so the ping-pong buffers end where 100 iterations would."""
        lo, hi = CG_BLOCK_BOUNDS[block], CG_BLOCK_BOUNDS[block + 1]
        for k in range(lo, hi):
            self._iteration(buf, k, tolerance)
        if block + 2 < len(CG_BLOCK_BOUNDS):
            wp.capture_if(
                buf.any_active[hi : hi + 1], on_true=lambda: self._graph_blocks(buf, block + 1, tolerance)
            )

    def _graph_loop(self, buf: SubstepBuffers, tolerance: float) -> None:
        """The iterations as one captured loop, two per turn while the CG is active: the
        iteration index is a device value (``loop_base``), so a substep's graph records 16
        launches instead of blocks of all 100 iterations (capturing those took 58 ms per
        substep graph of a 12 x 12 sheet on a 2-core CPU: 0.87 s of a 2.2 s fit, which builds
        three simulators)."""
        k_ = self.kernels
        d = self.arrays.device
        wp.launch(
            k_.cg_loop_start, dim=1, device=d, inputs=[buf.any_active], outputs=[buf.loop_base, buf.loop_more]
        )

        def two_iterations() -> None:
            self._iteration(buf, 0, tolerance, buf.loop_base)
            self._iteration(buf, 1, tolerance, buf.loop_base)
            wp.launch(
                k_.cg_loop_next,
                dim=1,
                device=d,
                inputs=[buf.any_active],
                outputs=[buf.loop_base, buf.loop_more],
            )

        wp.capture_while(buf.loop_more, two_iterations)

    def dot(
        self,
        a: wp.array,
        b: wp.array,
        row: int,
        partials: wp.array,
        out: wp.array,
        base: wp.array | None = None,
    ) -> None:
        """out[(row + base[0]) * members + m] = member m's a . b in a fixed order (``dots.py``)."""
        rows = (row, self.no_offset if base is None else base)
        launch_dot(self.dot_kernels, a, b, rows, partials, out, self.dot_mode, self.arrays.members)

    def _iteration(
        self, buf: SubstepBuffers, k: int, tolerance: float = CG_TOLERANCE, base: wp.array | None = None
    ) -> None:
        """CG iteration ``k`` (+ ``base[0]``, a device value, in a captured loop), masked when
        the CG is no longer active."""
        base = self.no_offset if base is None else base
        a = self.arrays
        k_ = self.kernels
        d = a.device
        n = a.vertex_count
        ping_pong = buf.ping_pong
        tol = a.dtype(tolerance)
        i = k % 2 if ping_pong else k
        j = (k + 1) % 2 if ping_pong else k + 1
        wp.launch(
            k_.matvec,
            dim=n,
            device=d,
            inputs=[
                buf.system_diag,
                buf.system_offdiag,
                a.vertex_spring_offsets,
                a.vertex_spring_ids,
                a.vertex_spring_other,
                buf.direction[i],
                a.pinned,
            ],
            outputs=[buf.product[i]],
        )
        self.dot(buf.direction[i], buf.product[i], k, buf.curvature_partials, buf.curvature, base)
        wp.launch(
            k_.cg_update,
            dim=n,
            device=d,
            inputs=[
                buf.dv[i],
                buf.residual[i],
                buf.direction[i],
                buf.product[i],
                buf.curvature,
                buf.delta,
                buf.active,
                k,
                base,
                a.member_vertices,
            ],
            outputs=[buf.dv[j], buf.residual[j]],
        )
        self.dot(buf.residual[j], buf.residual[j], k + 1, buf.delta_partials, buf.delta, base)
        wp.launch(
            k_.cg_direction,
            dim=n,
            device=d,
            inputs=[
                buf.residual[j],
                buf.direction[i],
                buf.delta,
                a.pinned,
                k,
                base,
                buf.frozen,
                a.member_vertices,
                tol,
            ],
            outputs=[buf.active, buf.any_active, buf.direction[j]],
        )
