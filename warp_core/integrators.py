"""Blender's cloth integrator in Warp: one linearized backward-Euler solve per substep,

    (M - h dF/dv - h^2 dF/dx) dv = h (F + h dF/dx v),   v += dv,   x += h v,

solved with Blender's truncated, filtered conjugate gradients (x0 = 0, stop when
r.r <= 1e-4 |S b|^2 or after 100 iterations). The truncation changes the dynamics, so it
is emulated rather than replaced by an exact solve.

Each CG iteration reads one set of buffers and writes the next, and iterations past
convergence are masked no-ops: the same kernels serve the forward pass (two buffer sets,
ping-pong, host convergence check every few iterations) and the adjoint's per-substep
recompute (one buffer set per iteration, differentiated by Warp's autodiff).
"""

import functools
from types import SimpleNamespace

import numpy as np
import warp as wp

from .energies import NO_FMA, PARAM_MASS, force_kernels

CG_TOLERANCE = 1.0e-4  # Blender: conjgrad_epsilon**2 with conjgrad_epsilon = 0.01
CG_MAX_ITERATIONS = 100


def substep_schedule(quality: int, time_scale: float) -> tuple[float, np.ndarray]:
    """Substep length and each substep's start time, as Blender's float32 loop runs them.

    ``while (step < tf) step += dt`` in float32 runs quality + 1 substeps for some
    qualities (12, 19, 23, ...); the pin interpolation then extrapolates slightly.
    """
    f32 = np.float32
    dt = f32(f32(1.0) / f32(quality)) * f32(time_scale)
    tf = f32(time_scale)
    starts = []
    step = f32(0.0)
    while step < tf:
        starts.append(step)
        step = f32(step + dt)
    return float(dt), np.array(starts, dtype=np.float32)


@functools.cache
def solver_kernels(dtype) -> SimpleNamespace:
    fk = force_kernels(dtype)
    vec3, mat33 = fk.vec3, fk.mat33

    @wp.func
    def filtered(value: vec3, pinned: wp.int32):
        # Blender's filter S: hard-pinned vertices have no free degree of freedom
        out = value
        if pinned != 0:
            out = vec3()
        return out

    @wp.kernel(module="unique", module_options=NO_FMA)
    def pin_velocities(
        v: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        goal_old: wp.array(dtype=vec3),
        goal_new: wp.array(dtype=vec3),
        inv_time_scale: dtype,
        v_out: wp.array(dtype=vec3),
    ):
        """Frame start: pinned vertices take the velocity of their goal."""
        i = wp.tid()
        out = v[i]
        if pinned[i] != 0:
            out = (goal_new[i] - goal_old[i]) * inv_time_scale
        v_out[i] = out

    @wp.kernel(module="unique", module_options=NO_FMA)
    def assemble_vertices(
        v: wp.array(dtype=vec3),
        force: wp.array(dtype=vec3),
        dfdx_diag: wp.array(dtype=mat33),
        dfdv_diag: wp.array(dtype=mat33),
        params: wp.array(dtype=dtype),
        h: dtype,
        system_diag: wp.array(dtype=mat33),
        rhs: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        jx = dfdx_diag[i]
        system_diag[i] = params[PARAM_MASS] * wp.identity(3, dtype) - h * dfdv_diag[i] - (h * h) * jx
        rhs[i] = h * force[i] + (h * h) * (jx * v[i])

    @wp.kernel(module="unique", module_options=NO_FMA)
    def assemble_springs(
        v: wp.array(dtype=vec3),
        spring_vertices: wp.array(dtype=wp.vec2i),
        spring_dfdx: wp.array(dtype=mat33),
        spring_dfdv: wp.array(dtype=mat33),
        h: dtype,
        system_offdiag: wp.array(dtype=mat33),
        rhs: wp.array(dtype=vec3),
    ):
        # off-diagonal blocks: dF/dx_ij = -spring_dfdx, so A_ij = h dfdv + h^2 dfdx
        s = wp.tid()
        i = spring_vertices[s][0]
        j = spring_vertices[s][1]
        jx = spring_dfdx[s]
        system_offdiag[s] = h * spring_dfdv[s] + (h * h) * jx
        wp.atomic_sub(rhs, i, (h * h) * (jx * v[j]))
        wp.atomic_sub(rhs, j, (h * h) * (jx * v[i]))

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_init(
        rhs: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        residual: wp.array(dtype=vec3),
        direction: wp.array(dtype=vec3),
        dv: wp.array(dtype=vec3),
        delta: wp.array(dtype=dtype),
    ):
        i = wp.tid()
        r = filtered(rhs[i], pinned[i])
        residual[i] = r
        direction[i] = r
        dv[i] = vec3()
        wp.atomic_add(delta, 0, wp.dot(r, r))

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_start(
        delta: wp.array(dtype=dtype), frozen: wp.array(dtype=wp.int32), active: wp.array(dtype=wp.int32)
    ):
        # frozen[0] >= 0: run exactly that many iterations (a device value, so one captured
        # graph serves every substep)
        act = int(0)  # noqa: UP018 (a dynamic Warp variable)
        frozen_count = frozen[0]
        if frozen_count >= 0:
            if frozen_count > 0:
                act = 1
        elif delta[0] > dtype(0.0):
            act = 1
        active[0] = act

    @wp.kernel(module="unique", module_options=NO_FMA)
    def matvec_springs(
        system_offdiag: wp.array(dtype=mat33),
        spring_vertices: wp.array(dtype=wp.vec2i),
        direction: wp.array(dtype=vec3),
        product: wp.array(dtype=vec3),
    ):
        s = wp.tid()
        i = spring_vertices[s][0]
        j = spring_vertices[s][1]
        block = system_offdiag[s]
        wp.atomic_add(product, i, block * direction[j])
        wp.atomic_add(product, j, wp.transpose(block) * direction[i])

    @wp.kernel(module="unique", module_options=NO_FMA)
    def matvec_vertices(
        system_diag: wp.array(dtype=mat33),
        direction: wp.array(dtype=vec3),
        offdiag_product: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        k: wp.int32,
        product: wp.array(dtype=vec3),
        curvature: wp.array(dtype=dtype),
    ):
        i = wp.tid()
        c = direction[i]
        s = filtered(system_diag[i] * c + offdiag_product[i], pinned[i])
        product[i] = s
        wp.atomic_add(curvature, k, wp.dot(c, s))

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_update(
        dv: wp.array(dtype=vec3),
        residual: wp.array(dtype=vec3),
        direction: wp.array(dtype=vec3),
        product: wp.array(dtype=vec3),
        curvature: wp.array(dtype=dtype),
        active: wp.array(dtype=wp.int32),
        k: wp.int32,
        dv_next: wp.array(dtype=vec3),
        residual_next: wp.array(dtype=vec3),
        delta: wp.array(dtype=dtype),
    ):
        i = wp.tid()
        alpha = dtype(0.0)
        if active[k] != 0:
            alpha = delta[k] / curvature[k]
        dv_next[i] = dv[i] + alpha * direction[i]
        r = residual[i] - alpha * product[i]
        residual_next[i] = r
        wp.atomic_add(delta, k + 1, wp.dot(r, r))

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_direction(
        residual_next: wp.array(dtype=vec3),
        direction: wp.array(dtype=vec3),
        delta: wp.array(dtype=dtype),
        pinned: wp.array(dtype=wp.int32),
        k: wp.int32,
        frozen: wp.array(dtype=wp.int32),
        max_iterations: wp.int32,
        tolerance: dtype,
        active: wp.array(dtype=wp.int32),
        direction_next: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        act = int(0)  # noqa: UP018 (a dynamic Warp variable)
        frozen_count = frozen[0]
        if active[k] != 0:
            if frozen_count >= 0:
                if k + 1 < frozen_count:
                    act = 1
            elif delta[k + 1] > tolerance * delta[0] and k + 1 < max_iterations:
                act = 1
        if i == 0:
            active[k + 1] = act
        c = direction[i]
        if act != 0:
            c = filtered(residual_next[i] + (delta[k + 1] / delta[k]) * direction[i], pinned[i])
        direction_next[i] = c

    @wp.kernel(module="unique", module_options=NO_FMA)
    def finish_substep(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        dv: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        goal_old: wp.array(dtype=vec3),
        goal_new: wp.array(dtype=vec3),
        pin_time: dtype,
        h: dtype,
        x_out: wp.array(dtype=vec3),
        v_out: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        v_new = v[i] + dv[i]
        x_new = x[i] + h * v_new
        if pinned[i] != 0:
            x_new = goal_old[i] + (goal_new[i] - goal_old[i]) * pin_time
        x_out[i] = x_new
        v_out[i] = v_new

    @wp.kernel(module="unique", module_options=NO_FMA)
    def count_iterations(
        active: wp.array(dtype=wp.int32), substep: wp.int32, counts: wp.array(dtype=wp.int32)
    ):
        n = int(0)  # noqa: UP018 (a dynamic Warp variable)
        for k in range(active.shape[0]):
            n += active[k]
        counts[substep] = n

    return SimpleNamespace(
        forces=fk,
        pin_velocities=pin_velocities,
        assemble_vertices=assemble_vertices,
        assemble_springs=assemble_springs,
        cg_init=cg_init,
        cg_start=cg_start,
        matvec_springs=matvec_springs,
        matvec_vertices=matvec_vertices,
        cg_update=cg_update,
        cg_direction=cg_direction,
        finish_substep=finish_substep,
        count_iterations=count_iterations,
    )
