"""Force terms of Blender's cloth model as Warp kernels, one kernel per term.

Every kernel exists for float32 and float64 (``force_kernels(wp.float64)``); all of them
are differentiable by Warp's autodiff, which the adjoint relies on. Forces are in
Blender's units: time in frames, so gravity is scaled by 1e-3.

Parameters live in one array ``params`` indexed by ``PARAM_*`` (order of
``params.ALL_PARAMETER_NAMES``), so one gradient array holds every parameter's derivative.
A batch of B members of one mesh (``batch.py``) lays the members' vertices, springs and
hinges one after the other and their parameter sets likewise: element ``e`` of a kernel
over ``per_member`` elements reads ``params[(e // per_member) * PARAM_COUNT + PARAM_*]``
(the very same arithmetic as a single run, whose member is 0).
"""

import functools
from types import SimpleNamespace

import warp as wp

from .member import member_functions
from .params import ALL_PARAMETER_NAMES

# No fused multiply-add: a spring at rest must measure exactly its rest length in every
# kernel and on every device (otherwise it falls into the compression branch at random),
# and CPU and CUDA then round alike.
NO_FMA = {"fuse_fp": False}

P = {name: k for k, name in enumerate(ALL_PARAMETER_NAMES)}
PARAM_TENSION = P["tension_stiffness"]
PARAM_COMPRESSION = P["compression_stiffness"]
PARAM_SHEAR = P["shear_stiffness"]
PARAM_BENDING = P["bending_stiffness"]
PARAM_TENSION_DAMPING = P["tension_damping"]
PARAM_COMPRESSION_DAMPING = P["compression_damping"]
PARAM_SHEAR_DAMPING = P["shear_damping"]
PARAM_BENDING_DAMPING = P["bending_damping"]
PARAM_AIR = P["air_damping"]
PARAM_MASS = P["mass"]
PARAM_PIN_STIFFNESS = P["pin_stiffness"]
PARAM_GOAL_FRICTION = P["goal_friction"]
PARAM_TENSION_MAX = P["tension_stiffness_max"]
PARAM_COMPRESSION_MAX = P["compression_stiffness_max"]
PARAM_SHEAR_MAX = P["shear_stiffness_max"]
PARAM_BENDING_MAX = P["bending_stiffness_max"]
# a batch of B parameter sets: member m's parameters are params[m * PARAM_COUNT + PARAM_*]
PARAM_COUNT = len(ALL_PARAMETER_NAMES)


@functools.cache
def force_kernels(dtype, batched: bool = False) -> SimpleNamespace:
    """Kernels for one scalar type (wp.float32 or wp.float64), of a batch or a single run."""
    member_of = member_functions(batched)[0]
    vec3 = wp.types.vector(3, dtype)
    mat33 = wp.types.matrix((3, 3), dtype)

    @wp.func
    def hinge_normal(a: vec3, b: vec3, c: vec3):
        # Blender's normal_tri_v3: normalize((a - b) x (b - c))
        return wp.normalize(wp.cross(a - b, b - c))

    @wp.func
    def face_mean(
        x: wp.array(dtype=vec3), face_vertices: wp.array(dtype=wp.int32), start: wp.int32, count: wp.int32
    ):
        s = vec3()
        for k in range(count):
            s = s + x[face_vertices[start + k]]
        return s / dtype(count)

    @wp.func
    def arctan2(y: dtype, x: dtype):
        # atan2 from +, -, *, / and sqrt only (correctly rounded on every device), so CPU
        # and CUDA compute the same angle; the C library's atan2 differs by an ulp between
        # them, enough to flip a spring's branch somewhere in a large sheet. Two argument
        # halvings, atan(t) = 2 atan(t / (1 + sqrt(1 + t^2))), bring t below tan(pi/16),
        # where 12 terms of the Taylor series are exact to double precision.
        ax = wp.abs(x)
        ay = wp.abs(y)
        big = wp.max(ax, ay)
        small = wp.min(ax, ay)
        r = dtype(0.0)
        if big > dtype(0.0):
            t = small / big
            t = t / (dtype(1.0) + wp.sqrt(dtype(1.0) + t * t))
            t = t / (dtype(1.0) + wp.sqrt(dtype(1.0) + t * t))
            t2 = t * t
            # Horner form of 1 - t2/3 + t2^2/5 - ..., written out: Warp's adjoint of a
            # loop-carried product inside a loop would use the final value
            series = dtype(1.0) / dtype(23.0)
            series = dtype(1.0) / dtype(21.0) - t2 * series
            series = dtype(1.0) / dtype(19.0) - t2 * series
            series = dtype(1.0) / dtype(17.0) - t2 * series
            series = dtype(1.0) / dtype(15.0) - t2 * series
            series = dtype(1.0) / dtype(13.0) - t2 * series
            series = dtype(1.0) / dtype(11.0) - t2 * series
            series = dtype(1.0) / dtype(9.0) - t2 * series
            series = dtype(1.0) / dtype(7.0) - t2 * series
            series = dtype(1.0) / dtype(5.0) - t2 * series
            series = dtype(1.0) / dtype(3.0) - t2 * series
            series = dtype(1.0) / dtype(1.0) - t2 * series
            r = dtype(4.0) * t * series
            if ay > ax:
                r = dtype(1.5707963267948966) - r
            if x < dtype(0.0):
                r = dtype(3.141592653589793) - r
            if y < dtype(0.0):
                r = -r
        return r

    @wp.func
    def hinge_angle(xi: vec3, xj: vec3, na: vec3, nb: vec3):
        edge = wp.normalize(xi - xj)
        return arctan2(wp.dot(wp.cross(na, nb), edge), wp.dot(na, nb))

    @wp.func
    def hinge_frame(
        x: wp.array(dtype=vec3),
        hinge_vertices: wp.array(dtype=wp.vec2i),
        hinge_face_a: wp.array(dtype=wp.vec2i),
        hinge_face_b: wp.array(dtype=wp.vec2i),
        hinge_face_vertices: wp.array(dtype=wp.int32),
        h: int,
    ):
        # face normals and the dihedral angle of hinge h; one function for the rest angle and
        # the runtime angle, so a flat hinge at rest measures exactly its rest angle
        i = hinge_vertices[h][0]
        j = hinge_vertices[h][1]
        fa = hinge_face_a[h]
        fb = hinge_face_b[h]
        na = hinge_normal(x[j], x[i], face_mean(x, hinge_face_vertices, fa[0], fa[1]))
        nb = hinge_normal(x[i], x[j], face_mean(x, hinge_face_vertices, fb[0], fb[1]))
        return na, nb, hinge_angle(x[i], x[j], na, nb)

    @wp.func
    def group_stiffness(params: wp.array(dtype=dtype), low: int, high: int, weight: dtype):
        # Blender's "min + lin_stiffness * fabsf(max - min)": the group weight spans from the
        # stiffness to its maximum (past it in the other direction when max < min). At
        # max == min, Blender's default, the derivative is the one of max above min (wp.abs
        # would give the other side's), so a fit of the maximum from there sets out upwards.
        span = params[high] - params[low]
        if span < dtype(0.0):
            span = -span
        return params[low] + weight * span

    @wp.func
    def choi_ko_polynomial(t: dtype):
        # Blender's fb(): the Choi-Ko compression curve in the length ratio t = l / L
        return (
            dtype(-11.541) * t * t * t * t
            + dtype(34.193) * t * t * t
            - dtype(39.083) * t * t
            + dtype(23.116) * t
            - dtype(9.713)
        )

    @wp.func
    def choi_ko_compression(length: dtype, rest: dtype, kb: dtype, cb: dtype):
        # Blender's fbstar(): the larger of the Choi-Ko polynomial and the linear force
        return wp.max(kb * choi_ko_polynomial(length / rest), cb * (length - rest))

    @wp.func
    def choi_ko_slope(length: dtype, rest: dtype, kb: dtype, cb: dtype):
        # Blender's fbstar_jacobi (already negated)
        t = length / rest
        fb = kb * choi_ko_polynomial(t)
        lin = cb * (length - rest)
        slope = -cb
        if fb >= lin:
            slope = -kb * (
                dtype(-46.164) * t * t * t + dtype(102.579) * t * t - dtype(78.166) * t + dtype(23.116)
            )
        return slope

    @wp.kernel(module="unique", module_options=NO_FMA)
    def spring_rest_lengths(
        x: wp.array(dtype=vec3),
        spring_vertices: wp.array(dtype=wp.vec2i),
        spring_shrink: wp.array(dtype=dtype),
        spring_rest_length: wp.array(dtype=dtype),
    ):
        s = wp.tid()
        ij = spring_vertices[s]
        # same expression as the runtime length, so springs at rest stay exactly at rest
        # (a factor of 1, no shrinking, leaves it unchanged)
        spring_rest_length[s] = wp.length(x[ij[1]] - x[ij[0]]) * spring_shrink[s]

    @wp.kernel(module="unique", module_options=NO_FMA)
    def structural_mean_inverse(
        spring_rest_length: wp.array(dtype=dtype),
        spring_kind: wp.array(dtype=wp.int32),
        inv_avg: wp.array(dtype=dtype),
    ):
        # one thread, springs in order: 1 / Blender's avg_spring_len (structural springs only)
        total = dtype(0.0)
        count = int(0)  # noqa: UP018 (a dynamic Warp variable)
        for s in range(spring_rest_length.shape[0]):
            if spring_kind[s] == 0:
                total = total + spring_rest_length[s]
                count = count + 1
        if total > dtype(0.0):
            inv_avg[0] = dtype(count) / total
        else:
            inv_avg[0] = dtype(1.0)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def hinge_rest_angles(
        x: wp.array(dtype=vec3),
        hinge_vertices: wp.array(dtype=wp.vec2i),
        hinge_face_a: wp.array(dtype=wp.vec2i),
        hinge_face_b: wp.array(dtype=wp.vec2i),
        hinge_face_vertices: wp.array(dtype=wp.int32),
        hinge_rest_angle: wp.array(dtype=dtype),
    ):
        h = wp.tid()
        na, nb, angle = hinge_frame(x, hinge_vertices, hinge_face_a, hinge_face_b, hinge_face_vertices, h)
        hinge_rest_angle[h] = angle

    @wp.kernel(module="unique", module_options=NO_FMA)
    def vertex_forces(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        goal_old: wp.array(dtype=vec3),
        goal_new: wp.array(dtype=vec3),
        goal_weight: wp.array(dtype=dtype),
        params: wp.array(dtype=dtype),
        member_vertices: wp.int32,
        gravity: vec3,
        goal_time: dtype,
        inv_avg: wp.array(dtype=dtype),
        pressure_force: wp.array(dtype=vec3),
        field_force: wp.array(dtype=vec3),
        force: wp.array(dtype=vec3),
        dfdx_diag: wp.array(dtype=mat33),
        dfdv_diag: wp.array(dtype=mat33),
    ):
        """Gravity, soft goal (pin) springs, air drag and the pressure force: the per-vertex
        terms (hinges and springs are gathered onto them when the system is assembled)."""
        i = wp.tid()
        p = member_of(i, member_vertices) * PARAM_COUNT
        inv_avg_spring_length = inv_avg[0]
        mass = params[p + PARAM_MASS]
        f = mass * gravity * dtype(0.001)
        jx = mat33()
        jv = mat33()
        w = goal_weight[i]
        if w > dtype(0.0):
            goal_x = goal_old[i] + (goal_new[i] - goal_old[i]) * goal_time
            goal_v = goal_new[i] - goal_old[i]
            extent = goal_x - x[i]
            length = wp.length(extent)
            if length > dtype(1.1920929e-07):
                k = w * params[p + PARAM_PIN_STIFFNESS] * inv_avg_spring_length
                c = params[p + PARAM_GOAL_FRICTION] * dtype(0.01)
                d = extent / length
                f = f + d * (k * length) + d * (c * wp.dot(goal_v - v[i], d))
                jx = jx - k * wp.identity(3, dtype)
                jv = jv - c * wp.outer(d, d)
        drag = params[p + PARAM_AIR] * dtype(0.01)
        f = f - drag * v[i]
        # explicit, after the drag as in Blender: pressure, then force fields
        f = f + pressure_force[i]
        f = f + field_force[i]
        jv = jv - drag * wp.identity(3, dtype)
        force[i] = f
        dfdx_diag[i] = jx
        dfdv_diag[i] = jv

    @wp.kernel(module="unique", module_options=NO_FMA)
    def hinge_forces(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        hinge_vertices: wp.array(dtype=wp.vec2i),
        hinge_spring: wp.array(dtype=wp.int32),
        hinge_face_a: wp.array(dtype=wp.vec2i),
        hinge_face_b: wp.array(dtype=wp.vec2i),
        hinge_face_vertices: wp.array(dtype=wp.int32),
        hinge_rest_angle: wp.array(dtype=dtype),
        spring_rest_length: wp.array(dtype=dtype),
        hinge_ang_stiffness: wp.array(dtype=dtype),
        params: wp.array(dtype=dtype),
        member_hinges: wp.int32,
        hinge_force_a: wp.array(dtype=vec3),
        hinge_force_b: wp.array(dtype=vec3),
        hinge_force_edge: wp.array(dtype=vec3),
    ):
        """Angular bending: an explicit force (no Jacobian), as in Blender. Each vertex of
        face a gets ``hinge_force_a``, of face b ``hinge_force_b``, and both hinge-edge
        vertices lose ``hinge_force_edge`` (gathered per vertex in a fixed order)."""
        h = wp.tid()
        p = member_of(h, member_hinges) * PARAM_COUNT
        na, nb, angle = hinge_frame(x, hinge_vertices, hinge_face_a, hinge_face_b, hinge_face_vertices, h)
        i = hinge_vertices[h][0]
        j = hinge_vertices[h][1]
        fa = hinge_face_a[h]
        fb = hinge_face_b[h]
        # damping acts on the face velocities relative to the hinge edge
        v_edge = (v[i] + v[j]) * dtype(0.5)
        va = face_mean(v, hinge_face_vertices, fa[0], fa[1]) - v_edge
        vb = face_mean(v, hinge_face_vertices, fb[0], fb[1]) - v_edge
        bending = group_stiffness(params, p + PARAM_BENDING, p + PARAM_BENDING_MAX, hinge_ang_stiffness[h])
        k = bending * spring_rest_length[hinge_spring[h]] * dtype(0.1)
        f = k * (angle - hinge_rest_angle[h]) - params[p + PARAM_BENDING_DAMPING] * (
            wp.dot(va, na) + wp.dot(vb, nb)
        )
        hinge_force_a[h] = na * (f / dtype(fa[1]))
        hinge_force_b[h] = nb * (f / dtype(fb[1]))
        hinge_force_edge[h] = (na + nb) * (f * dtype(0.5))

    @wp.kernel(module="unique", module_options=NO_FMA)
    def spring_forces(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        spring_vertices: wp.array(dtype=wp.vec2i),
        spring_kind: wp.array(dtype=wp.int32),
        spring_rest_length: wp.array(dtype=dtype),
        spring_lin_stiffness: wp.array(dtype=dtype),
        params: wp.array(dtype=dtype),
        member_springs: wp.int32,
        inv_avg: wp.array(dtype=dtype),
        angular_model: wp.int32,
        sewing_force_max: dtype,
        spring_force: wp.array(dtype=vec3),
        spring_dfdx: wp.array(dtype=mat33),
        spring_dfdv: wp.array(dtype=mat33),
    ):
        """Structural, compression, shear, linear-bending and sewing springs with their
        Jacobians: the force on the spring's first vertex (the second gets its negative)."""
        s = wp.tid()
        p = member_of(s, member_springs) * PARAM_COUNT
        inv_avg_spring_length = inv_avg[0]
        i = spring_vertices[s][0]
        j = spring_vertices[s][1]
        extent = x[j] - x[i]
        vel = v[j] - v[i]
        length = wp.length(extent)
        rest = spring_rest_length[s]
        d = vec3()
        if length > dtype(1.1920929e-07):
            d = extent / length
        kind = spring_kind[s]
        lin = spring_lin_stiffness[s]
        f = vec3()
        jx = mat33()
        jv = mat33()
        active = int(0)  # noqa: UP018 (a dynamic Warp variable)
        damping = dtype(0.0)
        if kind == 2:  # LINEAR bending: compression only, no damping term
            if length < rest:
                kb = (
                    group_stiffness(params, p + PARAM_BENDING, p + PARAM_BENDING_MAX, lin)
                    * inv_avg_spring_length
                    / dtype(20.0)
                )
                cb = kb * params[p + PARAM_BENDING_DAMPING]
                f = d * choi_ko_compression(length, rest, kb, cb)
                jx = wp.outer(d, d) * choi_ko_slope(length, rest, kb, cb)
                active = 1
        else:
            k = group_stiffness(params, p + PARAM_TENSION, p + PARAM_TENSION_MAX, lin) * inv_avg_spring_length
            damping = params[p + PARAM_TENSION_DAMPING]
            if kind == 1:
                k = group_stiffness(params, p + PARAM_SHEAR, p + PARAM_SHEAR_MAX, lin) * inv_avg_spring_length
                damping = params[p + PARAM_SHEAR_DAMPING]
            if length >= rest and length > dtype(0.0):
                stretch = k * (length - rest)
                # sewing (kind 3): Blender caps the force, not its Jacobian
                if kind == 3 and sewing_force_max > dtype(0.0) and stretch > sewing_force_max:
                    stretch = sewing_force_max
                f = d * stretch
                # Blender's dfdx_spring: k ((I - d d^T) L/l - I)
                jx = k * ((wp.identity(3, dtype) - wp.outer(d, d)) * (rest / length) - wp.identity(3, dtype))
                active = 1
            elif kind == 0 and angular_model != 0:
                kc = (
                    group_stiffness(params, p + PARAM_COMPRESSION, p + PARAM_COMPRESSION_MAX, lin)
                    * inv_avg_spring_length
                )
                damping = params[p + PARAM_COMPRESSION_DAMPING]
                f = d * choi_ko_compression(length, rest, kc, kc)
                jx = wp.outer(d, d) * choi_ko_slope(length, rest, kc, kc)
                active = 1
            if active == 1:
                f = f + d * (damping * wp.dot(vel, d))
                jv = -damping * wp.outer(d, d)
        spring_force[s] = f
        spring_dfdx[s] = jx
        spring_dfdv[s] = jv

    return SimpleNamespace(
        vec3=vec3,
        mat33=mat33,
        spring_rest_lengths=spring_rest_lengths,
        structural_mean_inverse=structural_mean_inverse,
        hinge_rest_angles=hinge_rest_angles,
        vertex_forces=vertex_forces,
        hinge_forces=hinge_forces,
        arctan2=arctan2,
        spring_forces=spring_forces,
    )
