"""Blender's cloth self-collision (``cloth_bvh_selfcollision``, ``cloth_selfcollision`` and
``cloth_selfcollision_response_static`` in Blender's ``collision.cc``) as Warp kernels:

1. candidate pairs of the cloth's own triangles whose 26-sided bounding volumes, grown by
   the self distance, overlap at the predicted positions (``self_collision_grid``), less
   the pairs Blender skips. Each triangle lists every partner in triangle order (the pair
   appears in both lists); the lower-numbered triangle owns the pair, and the other finds
   the pair's record in the owner's list (``mirrors``);
2. per owned pair, the closest points of the two triangles, the lower-numbered one first
   (Blender's order: the contact test is not symmetric), in contact within twice the self
   distance: each pair evaluated once;
3. per owned pair, the impulses of its contact on both triangles' corners, which
   ``apply_impulses`` gathers per vertex, largest per axis, over each triangle's partners
   in triangle order (the order a tie between equal magnitudes is settled by).

Nothing is reduced with atomics, so the result is the same on every device.
"""

import functools
from types import SimpleNamespace

import warp as wp

from .collision_geometry import ALMOST_ZERO, collision_geometry
from .collision_kernels import collision_kernels
from .force_kernels import NO_FMA


@functools.cache
def self_collision_kernels(dtype) -> SimpleNamespace:
    g = collision_geometry(dtype)
    vec3 = g.vec3
    # the object collisions' impulse arithmetic, as Blender shares it between the two
    shared = collision_kernels(dtype)
    weighted, clamped, larger_per_axis = shared.weighted, shared.clamped, shared.larger_per_axis

    @wp.kernel(module="unique", module_options=NO_FMA)
    def mirrors(
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        candidate_lower: wp.array(dtype=wp.int32),
        mirror: wp.array2d(dtype=wp.int32),
        overflow: wp.array(dtype=wp.int32),
    ):
        # a pair's record lives with its lower-numbered triangle: where in the partner's
        # sorted list (past its lower partners) t is (missing only from a truncated list)
        t = wp.tid()
        for s in range(candidate_lower[t]):
            j = candidate[t, s]
            lo = candidate_lower[j]
            hi = candidate_count[j]
            while lo < hi:
                mid = (lo + hi) // 2
                if candidate[j, mid] < t:
                    lo = mid + 1
                else:
                    hi = mid
            found = int(-1)  # noqa: UP018 (a dynamic Warp variable)
            if lo < candidate_count[j]:
                if candidate[j, lo] == t:
                    found = lo
            if found < 0:
                overflow[0] = 1
            mirror[t, s] = found

    @wp.kernel(module="unique", module_options=NO_FMA)
    def contacts(
        tris: wp.array(dtype=wp.vec3i),
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        candidate_lower: wp.array(dtype=wp.int32),
        tx: wp.array(dtype=vec3),
        self_distance: dtype,
        pair_active: wp.array2d(dtype=wp.int32),
        pair_normal: wp.array2d(dtype=vec3),
        pair_distance: wp.array2d(dtype=dtype),
        pair_aw: wp.array2d(dtype=vec3),
        pair_bw: wp.array2d(dtype=vec3),
        lanes: wp.int32,
    ):
        # cloth_selfcollision for each pair t owns (t the lower-numbered triangle a, the
        # partner b), neither Single Sided nor along a normal; ``lanes`` threads share them
        t, lane = wp.tid()
        for s in range(candidate_lower[t] + lane, candidate_count[t], lanes):
            pair_active[t, s] = 0
            a = tris[t]
            b = tris[candidate[t, s]]
            a0 = tx[a[0]]
            a1 = tx[a[1]]
            a2 = tx[a[2]]
            b0 = tx[b[0]]
            b1 = tx[b[1]]
            b2 = tx[b[2]]
            dist, pa, pb, vec = g.contact(a0, a1, a2, b0, b1, b2, 0, 0)
            if dist <= self_distance * dtype(2.0) + dtype(ALMOST_ZERO) and wp.length_sq(vec) > dtype(
                ALMOST_ZERO
            ):
                pair_active[t, s] = 1
                pair_normal[t, s] = wp.normalize(vec)
                pair_distance[t, s] = dist
                pair_aw[t, s] = g.barycentric(pa, a0, a1, a2)
                pair_bw[t, s] = g.barycentric(pb, b0, b1, b2)

    @wp.func
    def pair_impulse_size(rel: vec3, n: vec3, d: dtype, friction: dtype, time_multiplier: dtype):
        """(tangent direction, friction impulse, normal impulse) of one pair in contact, as
        cloth_selfcollision_response_static: the normal part stops the approach (a third of
        it on each side), plus a repulsion inside the minimum distance."""
        mag = wp.dot(rel, n)
        tangent = vec3()
        friction_imp = dtype(0.0)
        normal_imp = dtype(0.0)
        if mag > dtype(0.0):
            t = rel - n * mag
            magtangent = wp.min(friction * dtype(0.01) * mag, wp.length(t))
            if magtangent > dtype(ALMOST_ZERO):
                tangent = wp.normalize(t)
                friction_imp = magtangent / dtype(1.5)
            imp = mag / dtype(3.0)
            normal_imp = imp
            if mag < dtype(0.1) * d * time_multiplier and d > dtype(ALMOST_ZERO):
                repulse = wp.min(d / time_multiplier, dtype(0.1) * d * time_multiplier - mag)
                if imp > dtype(ALMOST_ZERO):
                    repulse = wp.min(repulse, dtype(5.0) * imp)
                repulse = wp.max(imp, repulse)
                normal_imp = imp + repulse / dtype(1.5)
        elif d > dtype(ALMOST_ZERO):
            normal_imp = (d / time_multiplier) / dtype(9.0)
        return tangent, friction_imp, normal_imp

    @wp.func
    def side_impulse(
        tangent: vec3, f_imp: dtype, n: vec3, n_imp: dtype, wc: dtype, side: dtype, clamp_sq: dtype
    ):
        imp = vec3()
        if f_imp > dtype(0.0):
            imp = tangent * (wc * (side * f_imp))
        imp = imp + n * (wc * (side * n_imp))
        return clamped(imp, clamp_sq)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def impulses(
        tris: wp.array(dtype=wp.vec3i),
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        candidate_lower: wp.array(dtype=wp.int32),
        pair_active: wp.array2d(dtype=wp.int32),
        pair_normal: wp.array2d(dtype=vec3),
        pair_distance: wp.array2d(dtype=dtype),
        pair_aw: wp.array2d(dtype=vec3),
        pair_bw: wp.array2d(dtype=vec3),
        tv: wp.array(dtype=vec3),
        self_distance: dtype,
        friction: dtype,
        time_multiplier: dtype,
        clamp_sq: dtype,
        pair_impulse: wp.array3d(dtype=vec3),
        lanes: wp.int32,
    ):
        # the impulses of each pair t owns on both triangles' corners: +w on a's (slots
        # 0-2), -u on b's (3-5)
        t, lane = wp.tid()
        for s in range(candidate_lower[t] + lane, candidate_count[t], lanes):
            for c in range(6):
                pair_impulse[t, s, c] = vec3()
            if pair_active[t, s] != 0:
                a = tris[t]
                b = tris[candidate[t, s]]
                w = pair_aw[t, s]
                u = pair_bw[t, s]
                n = pair_normal[t, s]
                v1 = weighted(tv[a[0]], tv[a[1]], tv[a[2]], w)
                v2 = weighted(tv[b[0]], tv[b[1]], tv[b[2]], u)
                d = self_distance * dtype(2.0) * dtype(8.0 / 9.0) - pair_distance[t, s]
                tangent, f_imp, n_imp = pair_impulse_size(v2 - v1, n, d, friction, time_multiplier)
                for c in range(3):
                    pair_impulse[t, s, c] = side_impulse(tangent, f_imp, n, n_imp, w[c], dtype(1.0), clamp_sq)
                    pair_impulse[t, s, 3 + c] = side_impulse(
                        tangent, f_imp, n, n_imp, u[c], dtype(-1.0), clamp_sq
                    )

    @wp.kernel(module="unique", module_options=NO_FMA)
    def apply_impulses(
        vertex_tri_offsets: wp.array(dtype=wp.int32),
        vertex_tri_corners: wp.array(dtype=wp.int32),
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        candidate_lower: wp.array(dtype=wp.int32),
        mirror: wp.array2d(dtype=wp.int32),
        pair_impulse: wp.array3d(dtype=vec3),
        tv: wp.array(dtype=vec3),
        dcvel: wp.array(dtype=vec3),
    ):
        # per vertex, over its triangles and each one's partners in triangle order (a
        # lower partner holds the pair's record), the largest impulse per axis
        i = wp.tid()
        best = vec3()
        for e in range(vertex_tri_offsets[i], vertex_tri_offsets[i + 1]):
            tc = vertex_tri_corners[e]
            t = tc // 3
            c = tc - 3 * t
            lower = candidate_lower[t]
            for s in range(candidate_count[t]):
                if s < lower:
                    m = mirror[t, s]
                    if m >= 0:
                        best = larger_per_axis(best, pair_impulse[candidate[t, s], m, 3 + c])
                else:
                    best = larger_per_axis(best, pair_impulse[t, s, c])
        tv[i] = tv[i] + best
        dcvel[i] = dcvel[i] + best

    return SimpleNamespace(
        vec3=vec3, mirrors=mirrors, contacts=contacts, impulses=impulses, apply_impulses=apply_impulses
    )
