"""Closest points between a cloth triangle and a collider triangle, as Blender's cloth
finds them (``compute_collision_point_tri_tri`` in ``collision.cc`` and the helpers it
calls in ``math_geom.cc``): the tests, their order and their tie-breaking follow Blender,
so the same contact point, normal and distance come out.

Every function exists for float32 and float64 (``collision_geometry(wp.float64)``).
"""

import functools
from types import SimpleNamespace

import warp as wp

# Blender's ALMOST_ZERO (FLT_EPSILON)
ALMOST_ZERO = 1.1920929e-07
FAR = 1.0e30  # FLT_MAX stand-in: farther than any contact


@functools.cache
def collision_geometry(dtype) -> SimpleNamespace:
    vec3 = wp.types.vector(3, dtype)

    @wp.func
    def closest_on_triangle(p: vec3, v1: vec3, v2: vec3, v3: vec3):
        # Ericson 5.1.5 by Voronoi regions, as closest_on_tri_to_point_v3. The surface loss
        # has the same regions returning barycentrics; here the point is formed as Blender
        # forms it (v1 + ab v, v2 + bc w, ...), whose rounding decides ties between features
        ab = v2 - v1
        ac = v3 - v1
        ap = p - v1
        d1 = wp.dot(ab, ap)
        d2 = wp.dot(ac, ap)
        r = v1
        done = d1 <= dtype(0.0) and d2 <= dtype(0.0)
        bp = p - v2
        d3 = wp.dot(ab, bp)
        d4 = wp.dot(ac, bp)
        if not done and d3 >= dtype(0.0) and d4 <= d3:
            r = v2
            done = True
        vc = d1 * d4 - d3 * d2
        if not done and vc <= dtype(0.0) and d1 >= dtype(0.0) and d3 <= dtype(0.0):
            r = v1 + ab * (d1 / (d1 - d3))
            done = True
        cp = p - v3
        d5 = wp.dot(ab, cp)
        d6 = wp.dot(ac, cp)
        if not done and d6 >= dtype(0.0) and d5 <= d6:
            r = v3
            done = True
        vb = d5 * d2 - d1 * d6
        if not done and vb <= dtype(0.0) and d2 >= dtype(0.0) and d6 <= dtype(0.0):
            r = v1 + ac * (d2 / (d2 - d6))
            done = True
        va = d3 * d6 - d5 * d4
        if not done and va <= dtype(0.0) and (d4 - d3) >= dtype(0.0) and (d5 - d6) >= dtype(0.0):
            r = v2 + (v3 - v2) * ((d4 - d3) / ((d4 - d3) + (d5 - d6)))
            done = True
        if not done:
            denom = dtype(1.0) / (va + vb + vc)
            r = v1 + ab * (vb * denom) + ac * (vc * denom)
        return r

    @wp.func
    def segment_factors(a0: vec3, a1: vec3, b0: vec3, b1: vec3):
        # isect_seg_seg_v3: the factor along each segment of its point closest to the other
        a_dir = a1 - a0
        b_dir = b1 - b0
        a0b0 = b0 - a0
        crs = wp.cross(b_dir, a_dir)
        nlen = wp.dot(crs, crs)
        fa = dtype(0.0)
        fb = dtype(0.0)
        if nlen == dtype(0.0):
            # parallel: the middle of the overlap
            len_a = wp.dot(a_dir, a_dir)
            len_b = wp.dot(b_dir, b_dir)
            if len_a != dtype(0.0):
                f1 = wp.clamp(wp.dot(a0b0, a_dir), dtype(0.0), len_a)
                f2 = wp.clamp(wp.dot(b1 - a0, a_dir), dtype(0.0), len_a)
                fa = (f1 + f2) / (dtype(2.0) * len_a)
            if len_b != dtype(0.0):
                f1 = wp.clamp(-wp.dot(a0b0, b_dir), dtype(0.0), len_b)
                f2 = wp.clamp(-wp.dot(b0 - a1, b_dir), dtype(0.0), len_b)
                fb = (f1 + f2) / (dtype(2.0) * len_b)
        else:
            c = crs - a0b0
            fa = wp.clamp(wp.dot(wp.cross(c, b_dir), crs) / nlen, dtype(0.0), dtype(1.0))
            fb = wp.clamp(wp.dot(wp.cross(c, a_dir), crs) / nlen, dtype(0.0), dtype(1.0))
        return wp.vector(fa, fb, dtype=dtype)

    @wp.func
    def plane_sides(n: vec3, p: vec3, q0: vec3, q1: vec3, q2: vec3):
        w = -wp.dot(n, p)
        return vec3(wp.dot(n, q0) + w, wp.dot(n, q1) + w, wp.dot(n, q2) + w)

    @wp.func
    def one_side(s: vec3):
        # every corner strictly on the same side of the other triangle's plane
        nonzero = s[0] != dtype(0.0) and s[1] != dtype(0.0) and s[2] != dtype(0.0)
        neg = s[0] < dtype(0.0)
        return nonzero and neg == (s[1] < dtype(0.0)) and neg == (s[2] < dtype(0.0))

    @wp.func
    def corner_order(s: vec3):
        # the corner alone on its side of the other plane goes to index 1
        o = wp.vec3i(0, 1, 2)
        if s[0] != dtype(0.0) and s[1] != dtype(0.0) and (s[0] < dtype(0.0)) == (s[1] < dtype(0.0)):
            o = wp.vec3i(1, 2, 0)
        elif s[1] != dtype(0.0) and s[2] != dtype(0.0) and (s[1] < dtype(0.0)) == (s[2] < dtype(0.0)):
            o = wp.vec3i(2, 0, 1)
        return o

    @wp.func
    def corner(t0: vec3, t1: vec3, t2: vec3, k: wp.int32):
        r = t0
        if k == 1:
            r = t1
        elif k == 2:
            r = t2
        return r

    @wp.func
    def side_of(s: vec3, k: wp.int32):
        return s[k]

    @wp.func
    def crossing_range(t0: vec3, t1: vec3, t2: vec3, s: vec3, direction: vec3):
        # where the triangle crosses the line of the two planes: (min, max) along it and
        # the two points, as isect_tri_tri_v3_ex
        o = corner_order(s)
        lone = corner(t0, t1, t2, o[1])
        first = corner(t0, t1, t2, o[0])
        last = corner(t0, t1, t2, o[2])
        dot_b = wp.dot(direction, lone)
        sc = side_of(s, o[1])
        lo = dot_b
        hi = dot_b
        p_lo = lone
        p_hi = lone
        if sc != dtype(0.0):
            fac0 = sc / (sc - side_of(s, o[0]))
            fac1 = sc / (sc - side_of(s, o[2]))
            off0 = fac0 * (wp.dot(direction, first) - dot_b)
            off1 = fac1 * (wp.dot(direction, last) - dot_b)
            p0 = lone + (first - lone) * fac0
            p1 = lone + (last - lone) * fac1
            if off0 > off1:
                lo = dot_b + off1
                hi = dot_b + off0
                p_lo = p1
                p_hi = p0
            else:
                lo = dot_b + off0
                hi = dot_b + off1
                p_lo = p0
                p_hi = p1
        return lo, hi, p_lo, p_hi

    @wp.func
    def triangles_intersect(a0: vec3, a1: vec3, a2: vec3, b0: vec3, b1: vec3, b2: vec3):
        # isect_tri_tri_v3_ex: (intersecting, edges of triangle a crossing b, the two points)
        plane_a = wp.cross(a0 - a1, a2 - a1)
        side_b = plane_sides(plane_a, a1, b0, b1, b2)
        hit = False
        count = int(0)  # noqa: UP018 (a dynamic Warp variable)
        i1 = vec3()
        i2 = vec3()
        coplanar = side_b[0] == dtype(0.0) and side_b[1] == dtype(0.0) and side_b[2] == dtype(0.0)
        if not coplanar and not one_side(side_b):
            plane_b = wp.cross(b0 - b1, b2 - b1)
            side_a = plane_sides(plane_b, b1, a0, a1, a2)
            if not one_side(side_a):
                direction = wp.cross(plane_a, plane_b)
                lo_a, hi_a, pa_lo, pa_hi = crossing_range(a0, a1, a2, side_a, direction)
                lo_b, hi_b, pb_lo, pb_hi = crossing_range(b0, b1, b2, side_b, direction)
                if hi_a > lo_b and lo_a < hi_b:
                    hit = True
                    if lo_a >= lo_b:
                        i1 = pa_lo
                        if hi_a <= hi_b:
                            i2 = pa_hi
                            count = 2
                        else:
                            i2 = pb_hi
                            count = 1
                    else:
                        if hi_a <= hi_b:
                            i1 = pa_hi
                            i2 = pb_lo
                            count = 1
                        else:
                            i1 = pb_lo
                            i2 = pb_hi
        return hit, count, i1, i2

    @wp.func
    def ray_hits_triangle(origin: vec3, direction: vec3, v0: vec3, v1: vec3, v2: vec3):
        # isect_ray_tri_v3: (hit, distance along the direction)
        e1 = v1 - v0
        e2 = v2 - v0
        p = wp.cross(direction, e2)
        a = wp.dot(e1, p)
        hit = False
        lam = dtype(0.0)
        if a <= dtype(-1.0e-8) or a >= dtype(1.0e-8):
            f = dtype(1.0) / a
            sv = origin - v0
            u = f * wp.dot(sv, p)
            if u >= dtype(0.0) and u <= dtype(1.0):
                q = wp.cross(sv, e1)
                v = f * wp.dot(direction, q)
                if v >= dtype(0.0) and u + v <= dtype(1.0):
                    lam = f * wp.dot(e2, q)
                    hit = lam >= dtype(0.0)
        return hit, lam

    @wp.func
    def in_slice(p: vec3, l1: vec3, l2: vec3):
        # point_in_slice_seg: p between the planes through l1 and l2 normal to l2 - l1
        n = l2 - l1
        h = wp.dot(n, p - l1) / wp.dot(n, n)
        return h >= dtype(0.0) and h <= dtype(1.0)

    @wp.func
    def backside_push(a0: vec3, a1: vec3, a2: vec3, b0: vec3, b1: vec3, b2: vec3, normal: vec3):
        """Single Sided, a cloth triangle behind the collider's: the deepest of its corners
        below b, b's corners above it and the edge crossings (found, point on a, on b)."""
        maxdist = dtype(0.0)
        found = False
        pa = vec3()
        pb = vec3()
        for i in range(3):
            p = corner(a0, a1, a2, i)
            hit, t = ray_hits_triangle(p, normal, b0, b1, b2)
            if hit and t > maxdist:
                maxdist = t
                pa = p
                pb = p + normal * t
                found = True
        for i in range(3):
            p = corner(b0, b1, b2, i)
            hit, t = ray_hits_triangle(p, -normal, a0, a1, a2)
            if hit and t > maxdist:
                maxdist = t
                pa = p - normal * t
                pb = p
                found = True
        for i in range(3):
            bi = corner(b0, b1, b2, i)
            bn = corner(b0, b1, b2, (i + 1) % 3)
            plane = wp.cross(bn - bi, normal)
            for j in range(3):
                aj = corner(a0, a1, a2, j)
                an = corner(a0, a1, a2, (j + 1) % 3)
                # isect_line_plane_v3, then both slices, then closest_to_line_v3
                u = an - aj
                dn = wp.dot(plane, u)
                if wp.abs(dn) > dtype(ALMOST_ZERO):
                    p = aj + u * (-wp.dot(plane, aj - bi) / dn)
                    if in_slice(p, aj, an) and in_slice(p, bi, bn):
                        e = bn - bi
                        q = bi + e * (wp.dot(e, p - bi) / wp.dot(e, e))
                        gap = p - q
                        t = wp.length(gap)
                        if t > maxdist and wp.dot(gap, normal) < dtype(0.0):
                            maxdist = t
                            pa = p
                            pb = q
                            found = True
        return found, pa, pb

    @wp.func
    def contact(
        a0: vec3, a1: vec3, a2: vec3, b0: vec3, b1: vec3, b2: vec3, culling: wp.int32, use_normal: wp.int32
    ):
        """(distance, point on a, point on b, direction away from b) of a cloth triangle a
        and a collider triangle b, as compute_collision_point_tri_tri; FAR when Single
        Sided (``culling``) rules the pair out."""
        hit, count, isect_a, isect_b = triangles_intersect(a0, a1, a2, b0, b1, b2)
        normal = wp.normalize(wp.cross(b0 - b1, b1 - b2))
        backside = False
        if culling != 0:
            if not hit:
                cent = (b0 + b1 + b2) / dtype(3.0)
                for i in range(3):
                    if wp.dot(corner(a0, a1, a2, i) - cent, normal) < dtype(0.0):
                        backside = True
            elif count != 1:
                backside = True
        pa = vec3()
        pb = vec3()
        vec = vec3()
        dist = dtype(FAR)
        done = False
        if count == 1:
            pa = isect_a
            pb = isect_b
            vec = pb - pa
            if use_normal != 0:
                vec = normal
            dist = dtype(0.0)
            done = True
        if not done and backside:
            found, qa, qb = backside_push(a0, a1, a2, b0, b1, b2, normal)
            if found:
                pa = qa
                pb = qb
                vec = pb - pa
                if use_normal != 0:
                    if wp.dot(normal, vec) >= dtype(0.0):
                        vec = normal
                    else:
                        vec = -normal
                dist = dtype(0.0)
                done = True
        if not done:
            for i in range(3):
                p = corner(a0, a1, a2, i)
                q = closest_on_triangle(p, b0, b1, b2)
                d = wp.length_sq(q - p)
                if d < dist:
                    dist = d
                    pa = p
                    pb = q
            for i in range(3):
                p = corner(b0, b1, b2, i)
                q = closest_on_triangle(p, a0, a1, a2)
                d = wp.length_sq(q - p)
                if d < dist:
                    dist = d
                    pa = q
                    pb = p
            if not hit:
                for i in range(3):
                    ea0 = corner(a0, a1, a2, i)
                    ea1 = corner(a0, a1, a2, (i + 1) % 3)
                    for j in range(3):
                        eb0 = corner(b0, b1, b2, j)
                        eb1 = corner(b0, b1, b2, (j + 1) % 3)
                        f = segment_factors(ea0, ea1, eb0, eb1)
                        p = ea0 + (ea1 - ea0) * f[0]
                        q = eb0 + (eb1 - eb0) * f[1]
                        d = wp.length_sq(p - q)
                        if d < dist:
                            dist = d
                            pa = p
                            pb = q
                vec = pa - pb
                dist = wp.sqrt(dist)
            else:
                vec = pb - pa
                dist = dtype(0.0)
            if culling != 0 and use_normal != 0:
                vec = normal
            elif use_normal != 0:
                if wp.dot(normal, vec) >= dtype(0.0):
                    vec = normal
                else:
                    vec = -normal
            elif culling != 0 and wp.dot(vec, normal) < dtype(0.0):
                dist = dtype(FAR)
        return dist, pa, pb, vec

    @wp.func
    def barycentric(p: vec3, p1: vec3, p2: vec3, p3: vec3):
        # collision_compute_barycentric: w1, w2 clamped at 0, w3 = 1 - w1 - w2 (may be < 0)
        t1 = p1 - p3
        t2 = p2 - p3
        t4 = p - p3
        a = wp.dot(t1, t1)
        b = wp.dot(t1, t2)
        c = wp.dot(t2, t2)
        e = wp.dot(t1, t4)
        f = wp.dot(t2, t4)
        d = a * c - b * b
        w = vec3(dtype(1.0 / 3.0), dtype(1.0 / 3.0), dtype(1.0 / 3.0))
        if wp.abs(d) >= dtype(ALMOST_ZERO):
            w1 = wp.max((e * c - b * f) / d, dtype(0.0))
            w2 = wp.max((f - b * w1) / c, dtype(0.0))
            w = vec3(w1, w2, dtype(1.0) - w1 - w2)
        return w

    return SimpleNamespace(
        vec3=vec3,
        closest_on_triangle=closest_on_triangle,
        segment_factors=segment_factors,
        triangles_intersect=triangles_intersect,
        contact=contact,
        barycentric=barycentric,
    )
