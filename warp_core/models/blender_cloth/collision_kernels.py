"""Blender's object collisions for cloth (``cloth_solve_collisions`` and
``cloth_bvh_collision`` in Blender) as Warp kernels, one per stage of a substep:

1. after the CG solve, the predicted positions ``tx = x + h v`` and displacements ``tv``;
2. the colliders moved to the substep's end, interpolated between their frame samples;
3. candidate pairs (cloth triangle, collider triangle) whose 26-sided bounding volumes,
   grown by the cloth's distance and the collider's outer thickness, overlap at the
   predicted positions (the pairs Blender's BVH overlap returns);
4. ``collision_quality`` rounds of: closest points of every candidate pair (``contact``),
   then twice the impulses of every pair in contact, each vertex taking per axis the
   impulse of largest magnitude among its pairs (Blender's rule, independent of order);
5. the accumulated impulses as a velocity change, which the substep's own update then
   adds (``step.SubstepSolver.finish``: the position follows from the velocity).

A vertex gathers its pairs' impulses through its triangles, in a fixed order, so there are
no atomics and the result is the same on every device.
"""

import functools
from types import SimpleNamespace

import warp as wp

from .collision_geometry import ALMOST_ZERO, collision_geometry
from .force_kernels import NO_FMA

KDOP_AXES = 13
CHUNK = 32  # collider triangles per box of the candidate search


@functools.cache
def collision_kernels(dtype) -> SimpleNamespace:
    g = collision_geometry(dtype)
    vec3 = g.vec3

    @wp.kernel(module="unique", module_options=NO_FMA)
    def predict(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        dv: wp.array(dtype=vec3),
        h: dtype,
        v_new: wp.array(dtype=vec3),
        tx: wp.array(dtype=vec3),
        tv: wp.array(dtype=vec3),
        dcvel: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        vn = v[i] + dv[i]
        p = x[i] + h * vn
        v_new[i] = vn
        tx[i] = p
        tv[i] = p - x[i]
        dcvel[i] = vec3()

    @wp.kernel(module="unique", module_options=NO_FMA)
    def move_colliders(
        pos_old: wp.array(dtype=vec3),
        pos_new: wp.array(dtype=vec3),
        vertex_object: wp.array(dtype=wp.int32),
        object_static: wp.array(dtype=wp.int32),
        s0: dtype,
        s1: dtype,
        current_xnew: wp.array(dtype=vec3),
        current_v: wp.array(dtype=vec3),
    ):
        # collision_move_object: a collider standing still this frame has no velocity
        i = wp.tid()
        a = pos_old[i]
        b = pos_new[i]
        if object_static[vertex_object[i]] != 0:
            current_xnew[i] = b
            current_v[i] = vec3()
        else:
            cx = a * (dtype(1.0) - s0) + b * s0
            cn = a * (dtype(1.0) - s1) + b * s1
            current_xnew[i] = cn
            current_v[i] = cn - cx

    @wp.func
    def kdop_axis(a: wp.int32):
        # BLI_kdopbvh's 13 axes (not normalized) of its 26-sided bounding volumes
        v = vec3(dtype(1.0), dtype(0.0), dtype(0.0))
        if a == 1:
            v = vec3(dtype(0.0), dtype(1.0), dtype(0.0))
        elif a == 2:
            v = vec3(dtype(0.0), dtype(0.0), dtype(1.0))
        elif a == 3:
            v = vec3(dtype(1.0), dtype(1.0), dtype(1.0))
        elif a == 4:
            v = vec3(dtype(1.0), dtype(-1.0), dtype(1.0))
        elif a == 5:
            v = vec3(dtype(1.0), dtype(1.0), dtype(-1.0))
        elif a == 6:
            v = vec3(dtype(1.0), dtype(-1.0), dtype(-1.0))
        elif a == 7:
            v = vec3(dtype(1.0), dtype(1.0), dtype(0.0))
        elif a == 8:
            v = vec3(dtype(1.0), dtype(0.0), dtype(1.0))
        elif a == 9:
            v = vec3(dtype(0.0), dtype(1.0), dtype(1.0))
        elif a == 10:
            v = vec3(dtype(1.0), dtype(-1.0), dtype(0.0))
        elif a == 11:
            v = vec3(dtype(1.0), dtype(0.0), dtype(-1.0))
        elif a == 12:
            v = vec3(dtype(0.0), dtype(1.0), dtype(-1.0))
        return v

    @wp.kernel(module="unique", module_options=NO_FMA)
    def kdops(
        tris: wp.array(dtype=wp.vec3i),
        tri_epsilon: wp.array(dtype=dtype),
        points: wp.array(dtype=vec3),
        kdop: wp.array2d(dtype=dtype),
    ):
        # each triangle's 26-DOP grown by its tree's epsilon times the axis length, as
        # Blender's BVH leaves (so every pair closer than the two epsilons overlaps)
        t = wp.tid()
        tri = tris[t]
        e = tri_epsilon[t]
        for a in range(KDOP_AXES):
            axis = kdop_axis(a)
            grow = e * wp.length(axis)
            p0 = wp.dot(points[tri[0]], axis)
            p1 = wp.dot(points[tri[1]], axis)
            p2 = wp.dot(points[tri[2]], axis)
            kdop[t, 2 * a] = wp.min(wp.min(p0, p1), p2) - grow
            kdop[t, 2 * a + 1] = wp.max(wp.max(p0, p1), p2) + grow

    @wp.func
    def kdops_apart(ka: wp.array2d(dtype=dtype), i: wp.int32, kb: wp.array2d(dtype=dtype), j: wp.int32):
        apart = bool(False)  # noqa: UP018 (a dynamic Warp variable)
        for a in range(KDOP_AXES):
            if ka[i, 2 * a] > kb[j, 2 * a + 1] or kb[j, 2 * a] > ka[i, 2 * a + 1]:
                apart = True
                break
        return apart

    @wp.kernel(module="unique", module_options=NO_FMA)
    def chunk_boxes(kdop: wp.array2d(dtype=dtype), chunk_box: wp.array2d(dtype=dtype)):
        # the box around CHUNK consecutive collider triangles (neighbours in the mesh,
        # mostly): a whole chunk far from a cloth triangle is skipped in one test
        c = wp.tid()
        first = c * CHUNK
        last = wp.min(first + CHUNK, kdop.shape[0])
        for a in range(3):
            lo = kdop[first, 2 * a]
            hi = kdop[first, 2 * a + 1]
            for t in range(first + 1, last):
                lo = wp.min(lo, kdop[t, 2 * a])
                hi = wp.max(hi, kdop[t, 2 * a + 1])
            chunk_box[c, 2 * a] = lo
            chunk_box[c, 2 * a + 1] = hi

    @wp.kernel(module="unique", module_options=NO_FMA)
    def candidates(
        tri_active: wp.array(dtype=wp.int32),
        cloth_kdop: wp.array2d(dtype=dtype),
        collider_kdop: wp.array2d(dtype=dtype),
        chunk_box: wp.array2d(dtype=dtype),
        slots: wp.int32,
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        overflow: wp.array(dtype=wp.int32),
    ):
        # the leaf pairs of BLI_bvhtree_overlap, in collider-triangle order
        t = wp.tid()
        c = int(0)  # noqa: UP018 (a dynamic Warp variable)
        n = collider_kdop.shape[0]
        if tri_active[t] != 0:
            for k in range(chunk_box.shape[0]):
                near = bool(True)  # noqa: UP018 (a dynamic Warp variable)
                for a in range(3):
                    if (
                        cloth_kdop[t, 2 * a] > chunk_box[k, 2 * a + 1]
                        or chunk_box[k, 2 * a] > cloth_kdop[t, 2 * a + 1]
                    ):
                        near = False
                if near:
                    for j in range(k * CHUNK, wp.min(k * CHUNK + CHUNK, n)):
                        if not kdops_apart(cloth_kdop, t, collider_kdop, j):
                            if c < slots:
                                candidate[t, c] = j
                            else:
                                overflow[0] = 1
                            c += 1
        candidate_count[t] = wp.min(c, slots)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def contacts(
        cloth_tris: wp.array(dtype=wp.vec3i),
        coll_tris: wp.array(dtype=wp.vec3i),
        tri_object: wp.array(dtype=wp.int32),
        thickness: wp.array(dtype=dtype),
        use_culling: wp.array(dtype=wp.int32),
        use_normal: wp.array(dtype=wp.int32),
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        tx: wp.array(dtype=vec3),
        xc: wp.array(dtype=vec3),
        distance_min: dtype,
        frame_index: wp.array(dtype=wp.int32),
        pair_active: wp.array2d(dtype=wp.int32),
        pair_normal: wp.array2d(dtype=vec3),
        pair_distance: wp.array2d(dtype=dtype),
        pair_aw: wp.array2d(dtype=vec3),
        pair_bw: wp.array2d(dtype=vec3),
        vertex_touched: wp.array(dtype=wp.int32),
        frame_touched: wp.array(dtype=wp.int32),
        lanes: wp.int32,
    ):
        # ``lanes`` threads per cloth triangle share its candidate pairs (1 on the CPU, where
        # a thread per empty slot costs more than the loop; the slot count on a GPU)
        t, lane = wp.tid()
        for s in range(lane, candidate_count[t], lanes):
            # every writer of a contact record writes the same 1: no race on the value
            pair_active[t, s] = 0
            j = candidate[t, s]
            a = cloth_tris[t]
            b = coll_tris[j]
            obj = tri_object[j]
            a0 = tx[a[0]]
            a1 = tx[a[1]]
            a2 = tx[a[2]]
            b0 = xc[b[0]]
            b1 = xc[b[1]]
            b2 = xc[b[2]]
            dist, pa, pb, vec = g.contact(a0, a1, a2, b0, b1, b2, use_culling[obj], use_normal[obj])
            if dist <= distance_min + thickness[obj] + dtype(ALMOST_ZERO) and wp.length_sq(vec) > dtype(
                ALMOST_ZERO
            ):
                pair_active[t, s] = 1
                pair_normal[t, s] = wp.normalize(vec)
                pair_distance[t, s] = dist
                pair_aw[t, s] = g.barycentric(pa, a0, a1, a2)
                pair_bw[t, s] = g.barycentric(pb, b0, b1, b2)
                vertex_touched[a[0]] = 1
                vertex_touched[a[1]] = 1
                vertex_touched[a[2]] = 1
                frame_touched[frame_index[0]] = 1

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

    @wp.kernel(module="unique", module_options=NO_FMA)
    def impulses(
        cloth_tris: wp.array(dtype=wp.vec3i),
        coll_tris: wp.array(dtype=wp.vec3i),
        tri_object: wp.array(dtype=wp.int32),
        thickness: wp.array(dtype=dtype),
        friction: wp.array(dtype=dtype),
        candidate: wp.array2d(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        pair_active: wp.array2d(dtype=wp.int32),
        pair_normal: wp.array2d(dtype=vec3),
        pair_distance: wp.array2d(dtype=dtype),
        pair_aw: wp.array2d(dtype=vec3),
        pair_bw: wp.array2d(dtype=vec3),
        tv: wp.array(dtype=vec3),
        current_v: wp.array(dtype=vec3),
        distance_min: dtype,
        time_multiplier: dtype,
        clamp_sq: dtype,
        pair_impulse: wp.array3d(dtype=vec3),
        lanes: wp.int32,
    ):
        # ``lanes`` threads per cloth triangle share its candidate pairs (1 on the CPU, where
        # a thread per empty slot costs more than the loop; the slot count on a GPU)
        t, lane = wp.tid()
        for s in range(lane, candidate_count[t], lanes):
            # cloth_collision_response_static for one pair
            i1 = vec3()
            i2 = vec3()
            i3 = vec3()
            if pair_active[t, s] != 0:
                j = candidate[t, s]
                a = cloth_tris[t]
                b = coll_tris[j]
                obj = tri_object[j]
                w = pair_aw[t, s]
                n = pair_normal[t, s]
                v1 = weighted(tv[a[0]], tv[a[1]], tv[a[2]], w)
                v2 = weighted(current_v[b[0]], current_v[b[1]], current_v[b[2]], pair_bw[t, s])
                rel = v2 - v1
                mag = wp.dot(rel, n)
                d = (distance_min + thickness[obj]) * dtype(8.0 / 9.0) - pair_distance[t, s]
                if mag > dtype(0.0):
                    tangent = rel - n * mag
                    magtangent = wp.min(friction[obj] * dtype(0.01) * mag, wp.length(tangent))
                    if magtangent > dtype(ALMOST_ZERO):
                        tangent = wp.normalize(tangent)
                        imp = magtangent / dtype(1.5)
                        i1 += tangent * (w[0] * imp)
                        i2 += tangent * (w[1] * imp)
                        i3 += tangent * (w[2] * imp)
                    imp = mag / dtype(1.5)
                    i1 += n * (w[0] * imp)
                    i2 += n * (w[1] * imp)
                    i3 += n * (w[2] * imp)
                    if mag < dtype(0.1) * d * time_multiplier and d > dtype(ALMOST_ZERO):
                        repulse = wp.min(d / time_multiplier, dtype(0.1) * d * time_multiplier - mag)
                        if imp > dtype(ALMOST_ZERO):
                            repulse = wp.min(repulse, dtype(5.0) * imp)
                        repulse = wp.max(imp, repulse)
                        imp = repulse / dtype(1.5)
                        # Blender adds this part unweighted to all three corners
                        i1 += n * imp
                        i2 += n * imp
                        i3 += n * imp
                elif d > dtype(ALMOST_ZERO):
                    imp = (d / time_multiplier) / dtype(4.5)
                    i1 += n * (w[0] * imp)
                    i2 += n * (w[1] * imp)
                    i3 += n * (w[2] * imp)
            pair_impulse[t, s, 0] = clamped(i1, clamp_sq)
            pair_impulse[t, s, 1] = clamped(i2, clamp_sq)
            pair_impulse[t, s, 2] = clamped(i3, clamp_sq)

    @wp.func
    def larger_per_axis(current: vec3, impulse: vec3):
        out = current
        for k in range(3):
            if wp.abs(out[k]) < wp.abs(impulse[k]):
                out[k] = impulse[k]
        return out

    @wp.kernel(module="unique", module_options=NO_FMA)
    def apply_impulses(
        vertex_tri_offsets: wp.array(dtype=wp.int32),
        vertex_tri_corners: wp.array(dtype=wp.int32),
        candidate_count: wp.array(dtype=wp.int32),
        pair_impulse: wp.array3d(dtype=vec3),
        tv: wp.array(dtype=vec3),
        dcvel: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        best = vec3()
        for e in range(vertex_tri_offsets[i], vertex_tri_offsets[i + 1]):
            tc = vertex_tri_corners[e]
            t = tc // 3
            c = tc - 3 * t
            for s in range(candidate_count[t]):
                best = larger_per_axis(best, pair_impulse[t, s, c])
        tv[i] = tv[i] + best
        dcvel[i] = dcvel[i] + best

    @wp.kernel(module="unique", module_options=NO_FMA)
    def move_predicted(
        x: wp.array(dtype=vec3),
        tv: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        tx: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        if pinned[i] == 0:
            tx[i] = x[i] + tv[i]

    @wp.kernel(module="unique", module_options=NO_FMA)
    def impulse_velocity(
        dcvel: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        h: dtype,
        velocity_change: wp.array(dtype=vec3),
    ):
        # the impulses as a velocity change (pinned vertices keep their velocity); the
        # substep's own update then moves every vertex by it
        i = wp.tid()
        change = vec3()
        if pinned[i] == 0:
            change = dcvel[i] * (dtype(1.0) / h)
        velocity_change[i] = change

    return SimpleNamespace(
        vec3=vec3,
        predict=predict,
        move_colliders=move_colliders,
        kdops=kdops,
        chunk_boxes=chunk_boxes,
        candidates=candidates,
        contacts=contacts,
        impulses=impulses,
        apply_impulses=apply_impulses,
        move_predicted=move_predicted,
        impulse_velocity=impulse_velocity,
        # the impulse arithmetic self collisions share (``self_collision_kernels``)
        weighted=weighted,
        clamped=clamped,
        larger_per_axis=larger_per_axis,
    )
