"""Work arrays of one substep: forces, the assembled system and the CG iterates."""

from __future__ import annotations

import warp as wp

from .schedule import CG_MAX_ITERATIONS
from .solver_kernels import solver_kernels


class SubstepBuffers:
    """Work arrays of one substep; ``cg_sets`` buffer sets for CG iterations.

    Per-iteration CG scalars (``delta``, ``curvature``, ``active``) have one slot per
    possible iteration and member (iteration k of member m at k * members + m), so a
    backward pass can read every iteration's values; ``any_active`` says per iteration
    whether any member's CG runs it (a single run's is its ``active``).
    """

    def __init__(
        self, sizes: tuple[int, int, int, int, int], cg_sets: int, dtype, device: str, requires_grad: bool
    ) -> None:
        # vertices, springs, hinges (all members'), partial sums per dot product, members
        n, n_springs, n_hinges, chunks, members = sizes
        rows = CG_MAX_ITERATIONS + 2
        fk = solver_kernels(dtype).forces
        vec3, mat33 = fk.vec3, fk.mat33

        def vec(count: int = n):
            return wp.zeros(count, dtype=vec3, device=device, requires_grad=requires_grad)

        def mat(count: int):
            return wp.zeros(count, dtype=mat33, device=device, requires_grad=requires_grad)

        self.v_start = vec()
        self.force = vec()
        self.pressure = wp.zeros(1, dtype=dtype, device=device, requires_grad=requires_grad)
        self.pressure_force = vec()  # stays 0 without pressure
        self.field_wind = vec()  # the force fields' wind and push per vertex, and the
        self.field_push = vec()  # force the triangles spread from them (0 without fields)
        self.field_force = vec()
        self.dfdx_diag = mat(n)
        self.dfdv_diag = mat(n)
        self.hinge_force_a = vec(n_hinges)
        self.hinge_force_b = vec(n_hinges)
        self.hinge_force_edge = vec(n_hinges)
        self.spring_force = vec(n_springs)
        self.spring_dfdx = mat(n_springs)
        self.spring_dfdv = mat(n_springs)
        self.system_diag = mat(n)
        self.system_offdiag = mat(n_springs)
        self.rhs = vec()
        self.delta = wp.zeros(rows * members, dtype=dtype, device=device, requires_grad=requires_grad)
        self.curvature = wp.zeros(rows * members, dtype=dtype, device=device, requires_grad=requires_grad)
        self.delta_partials = wp.zeros(
            (rows, chunks), dtype=dtype, device=device, requires_grad=requires_grad
        )
        self.curvature_partials = wp.zeros(
            (rows, chunks), dtype=dtype, device=device, requires_grad=requires_grad
        )
        self.active = wp.zeros(rows * members, dtype=wp.int32, device=device)
        self.any_active = self.active if members == 1 else wp.zeros(rows, dtype=wp.int32, device=device)
        self.frozen = wp.full(1, -1, dtype=wp.int32, device=device)  # CG iteration count, or -1
        # a captured CG loop's first iteration index this turn (even) and whether it goes on
        self.loop_base = wp.zeros(1, dtype=wp.int32, device=device)
        self.loop_more = wp.zeros(1, dtype=wp.int32, device=device)
        self.dv = [vec() for _ in range(cg_sets + 1)]
        self.residual = [vec() for _ in range(cg_sets + 1)]
        self.direction = [vec() for _ in range(cg_sets + 1)]
        self.product = [vec() for _ in range(cg_sets)]
        self.cg_sets = cg_sets
        # without gradients two buffer sets alternate; with them each iteration keeps its own
        self.ping_pong = not requires_grad
