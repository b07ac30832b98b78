"""Blender's cloth self-collision (``cloth_bvh_selfcollision``, ``cloth_selfcollision`` and
``cloth_selfcollision_response_static`` in Blender's ``collision.cc``) as Warp kernels:

1. candidate pairs of the cloth's own triangles whose 26-sided bounding volumes, grown by
   the self distance, overlap at the predicted positions (the pairs Blender's
   ``BLI_bvhtree_overlap_self`` returns), less the pairs Blender skips: triangles that share
   a vertex or a sewing edge, both wholly pinned, or either wholly in the self-collision
   group. Each triangle lists every partner (the pair appears in both lists);
2. per listed pair, the closest points of the two triangles, the lower-numbered one first
   (Blender's order: the contact test is not symmetric), in contact within twice the self
   distance;
3. per listed pair, the impulses of its contact on the listing triangle's three corners
   (the pair's impulses on either triangle come out of the same arithmetic in both lists),
   which ``collision_kernels.apply_impulses`` gathers per vertex, largest per axis.

Nothing is reduced with atomics, so the result is the same on every device.
"""

import functools
from types import SimpleNamespace

import warp as wp

from .collision_geometry import ALMOST_ZERO, collision_geometry
from .collision_kernels import CHUNK, KDOP_AXES
from .force_kernels import NO_FMA


@functools.cache
def self_collision_kernels(dtype) -> SimpleNamespace:
    g = collision_geometry(dtype)
    vec3 = g.vec3

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
        chunk_box: wp.array2d(dtype=dtype),
        slots: wp.int32,
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        overflow: wp.array(dtype=wp.int32),
    ):
        # every partner of triangle t, in triangle order
        t = wp.tid()
        c = int(0)  # noqa: UP018 (a dynamic Warp variable)
        n = kdop.shape[0]
        if tri_excluded[t] == 0:
            for k in range(chunk_box.shape[0]):
                near = bool(True)  # noqa: UP018 (a dynamic Warp variable)
                for a in range(3):
                    if kdop[t, 2 * a] > chunk_box[k, 2 * a + 1] or chunk_box[k, 2 * a] > kdop[t, 2 * a + 1]:
                        near = False
                if near:
                    for j in range(k * CHUNK, wp.min(k * CHUNK + CHUNK, n)):
                        if j == t or tri_excluded[j] != 0 or (tri_pinned[t] != 0 and tri_pinned[j] != 0):
                            continue
                        if kdops_apart(kdop, t, j):
                            continue
                        if pair_allowed(tris[t], tris[j], sew_offsets, sew_partners):
                            if c < slots:
                                candidate[t, c] = j
                            else:
                                overflow[0] = 1
                            c += 1
        candidate_count[t] = wp.min(c, slots)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def contacts(
        tris: wp.array(dtype=wp.vec3i),
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        tx: wp.array(dtype=vec3),
        self_distance: dtype,
        pair_active: wp.array2d(dtype=wp.int32),
        pair_normal: wp.array2d(dtype=vec3),
        pair_distance: wp.array2d(dtype=dtype),
        pair_aw: wp.array2d(dtype=vec3),
        pair_bw: wp.array2d(dtype=vec3),
        lanes: wp.int32,
    ):
        # cloth_selfcollision for the pair (lower-numbered triangle a, other b), neither Single
        # Sided nor along a normal; ``lanes`` threads per triangle share its list
        t, lane = wp.tid()
        for s in range(lane, candidate_count[t], lanes):
            pair_active[t, s] = 0
            j = candidate[t, s]
            a = tris[wp.min(t, j)]
            b = tris[wp.max(t, j)]
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
    def weighted(p0: vec3, p1: vec3, p2: vec3, w: vec3):
        return p0 * w[0] + p1 * w[1] + p2 * w[2]

    @wp.func
    def clamped(impulse: vec3, clamp_sq: dtype):
        # cloth_collision_impulse_vert: an impulse beyond the clamp is dropped, not shortened
        out = impulse
        if clamp_sq > dtype(0.0) and wp.length_sq(impulse) > clamp_sq:
            out = vec3()
        return out

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

    @wp.kernel(module="unique", module_options=NO_FMA)
    def impulses(
        tris: wp.array(dtype=wp.vec3i),
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
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
        # the impulses of the pair on the listing triangle's corners: +w on a, -u on b
        t, lane = wp.tid()
        for s in range(lane, candidate_count[t], lanes):
            i0 = vec3()
            i1 = vec3()
            i2 = vec3()
            if pair_active[t, s] != 0:
                j = candidate[t, s]
                a = tris[wp.min(t, j)]
                b = tris[wp.max(t, j)]
                w = pair_aw[t, s]
                u = pair_bw[t, s]
                n = pair_normal[t, s]
                v1 = weighted(tv[a[0]], tv[a[1]], tv[a[2]], w)
                v2 = weighted(tv[b[0]], tv[b[1]], tv[b[2]], u)
                d = self_distance * dtype(2.0) * dtype(8.0 / 9.0) - pair_distance[t, s]
                tangent, f_imp, n_imp = pair_impulse_size(v2 - v1, n, d, friction, time_multiplier)
                side = dtype(1.0)
                weights = w
                if t > j:
                    side = dtype(-1.0)
                    weights = u
                for c in range(3):
                    wc = weights[c]
                    imp = vec3()
                    if f_imp > dtype(0.0):
                        imp = tangent * (wc * (side * f_imp))
                    imp = imp + n * (wc * (side * n_imp))
                    if c == 0:
                        i0 = imp
                    elif c == 1:
                        i1 = imp
                    else:
                        i2 = imp
            pair_impulse[t, s, 0] = clamped(i0, clamp_sq)
            pair_impulse[t, s, 1] = clamped(i1, clamp_sq)
            pair_impulse[t, s, 2] = clamped(i2, clamp_sq)

    return SimpleNamespace(vec3=vec3, candidates=candidates, contacts=contacts, impulses=impulses)
