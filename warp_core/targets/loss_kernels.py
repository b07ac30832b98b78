"""Warp kernels of the cloth-to-target mismatch (the vertex and surface kinds launch them).

Every kernel comes in float32 and float64: a factory builds one namespace of kernels per
scalar type and caches it, so each dtype compiles once; the small helpers here map an
array or scalar type to the matching vector and numpy types.
"""

import functools
from types import SimpleNamespace
from typing import Any

import numpy as np
import warp as wp

__all__ = ["numpy_float", "scalar_type", "surface_kernels", "vec3_type", "vertex_kernels"]


def scalar_type(array: wp.array) -> Any:
    """Scalar type (wp.float32 / wp.float64) of a vec3 array: which kernels it takes."""
    dtype = array.dtype
    scalar = getattr(dtype, "_wp_scalar_type_", None)
    if scalar not in (wp.float32, wp.float64) or getattr(dtype, "_length_", None) != 3:
        raise TypeError(f"expected an array of float32 or float64 vec3, got dtype {dtype}")
    return scalar


def vec3_type(dtype: Any) -> Any:
    return wp.vec3d if dtype == wp.float64 else wp.vec3f


def numpy_float(dtype: Any) -> type:
    return np.float64 if dtype == wp.float64 else np.float32


@functools.cache
def vertex_kernels(dtype: Any) -> SimpleNamespace:
    vec3 = vec3_type(dtype)

    @wp.kernel(module="unique")
    def weighted_squared_distance_sum(
        positions: wp.array(dtype=vec3),
        targets: wp.array(dtype=vec3),
        weights: wp.array(dtype=dtype),
        scale: dtype,
        loss: wp.array(dtype=dtype),
    ):
        i = wp.tid()
        d = positions[i] - targets[i]
        wp.atomic_add(loss, 0, scale * weights[i] * wp.dot(d, d))

    @wp.kernel(module="unique")
    def weighted_vertex_residuals(
        positions: wp.array(dtype=vec3),
        targets: wp.array(dtype=vec3),
        weights: wp.array(dtype=dtype),
        residuals: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        residuals[i] = wp.sqrt(weights[i]) * (positions[i] - targets[i])

    return SimpleNamespace(
        weighted_squared_distance_sum=weighted_squared_distance_sum,
        weighted_vertex_residuals=weighted_vertex_residuals,
    )


@functools.cache
def surface_kernels(dtype: Any) -> SimpleNamespace:
    vec3 = vec3_type(dtype)
    zero = dtype(0.0)
    one = dtype(1.0)

    @wp.func
    def closest_point_barycentrics(p: vec3, a: vec3, b: vec3, c: vec3) -> vec3:
        # Ericson, Real-Time Collision Detection 5.1.5: Voronoi regions of the triangle.
        ab = b - a
        ac = c - a
        ap = p - a
        d1 = wp.dot(ab, ap)
        d2 = wp.dot(ac, ap)
        if d1 <= zero and d2 <= zero:
            return vec3(one, zero, zero)
        bp = p - b
        d3 = wp.dot(ab, bp)
        d4 = wp.dot(ac, bp)
        if d3 >= zero and d4 <= d3:
            return vec3(zero, one, zero)
        vc = d1 * d4 - d3 * d2
        if vc <= zero and d1 >= zero and d3 <= zero:
            v = d1 / (d1 - d3)
            return vec3(one - v, v, zero)
        cp = p - c
        d5 = wp.dot(ab, cp)
        d6 = wp.dot(ac, cp)
        if d6 >= zero and d5 <= d6:
            return vec3(zero, zero, one)
        vb = d5 * d2 - d1 * d6
        if vb <= zero and d2 >= zero and d6 <= zero:
            w = d2 / (d2 - d6)
            return vec3(one - w, zero, w)
        va = d3 * d6 - d5 * d4
        if va <= zero and (d4 - d3) >= zero and (d5 - d6) >= zero:
            w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
            return vec3(zero, one - w, w)
        denom = one / (va + vb + vc)
        v = vb * denom
        w = vc * denom
        return vec3(one - v - w, v, w)

    @wp.func
    def triangle_point(points: wp.array(dtype=vec3), triangles: wp.array2d(dtype=wp.int32), f: int, b: vec3):
        return (
            b[0] * points[triangles[f, 0]] + b[1] * points[triangles[f, 1]] + b[2] * points[triangles[f, 2]]
        )

    @wp.kernel(module="unique", enable_backward=False)
    def convert_to_float32_points(points: wp.array(dtype=vec3), points_f32: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        p = points[i]
        points_f32[i] = wp.vec3(wp.float32(p[0]), wp.float32(p[1]), wp.float32(p[2]))

    @wp.kernel(module="unique", enable_backward=False)
    def closest_points_on_mesh(
        mesh: wp.uint64,
        query_points: wp.array(dtype=vec3),
        mesh_points: wp.array(dtype=vec3),
        mesh_triangles: wp.array2d(dtype=wp.int32),
        max_distance: float,
        closest_faces: wp.array(dtype=wp.int32),
        closest_barycentrics: wp.array(dtype=vec3),
        closest_points: wp.array(dtype=vec3),
    ):
        # The float32 BVH query picks the face; the point on it is recomputed in `dtype`.
        i = wp.tid()
        p = query_points[i]
        p_f32 = wp.vec3(wp.float32(p[0]), wp.float32(p[1]), wp.float32(p[2]))
        query = wp.mesh_query_point_no_sign(mesh, p_f32, max_distance)
        if query.result:
            f = query.face
            b = closest_point_barycentrics(
                p,
                mesh_points[mesh_triangles[f, 0]],
                mesh_points[mesh_triangles[f, 1]],
                mesh_points[mesh_triangles[f, 2]],
            )
            closest_faces[i] = f
            closest_barycentrics[i] = b
            closest_points[i] = triangle_point(mesh_points, mesh_triangles, f, b)
        else:
            closest_faces[i] = -1
            closest_barycentrics[i] = vec3(zero, zero, zero)
            closest_points[i] = p

    @wp.kernel(module="unique")
    def surface_points_squared_distance_sum(
        positions: wp.array(dtype=vec3),
        triangles: wp.array2d(dtype=wp.int32),
        faces: wp.array(dtype=wp.int32),
        barycentrics: wp.array(dtype=vec3),
        points: wp.array(dtype=vec3),
        weights: wp.array(dtype=dtype),
        scale: dtype,
        loss: wp.array(dtype=dtype),
    ):
        # |t_j - (b0 x_a + b1 x_b + b2 x_c)|^2 with the face and barycentrics held fixed.
        j = wp.tid()
        f = faces[j]
        if f >= 0:
            d = triangle_point(positions, triangles, f, barycentrics[j]) - points[j]
            wp.atomic_add(loss, 0, scale * weights[j] * wp.dot(d, d))

    @wp.kernel(module="unique")
    def surface_points_residuals(
        positions: wp.array(dtype=vec3),
        triangles: wp.array2d(dtype=wp.int32),
        faces: wp.array(dtype=wp.int32),
        barycentrics: wp.array(dtype=vec3),
        points: wp.array(dtype=vec3),
        weights: wp.array(dtype=dtype),
        offset: int,
        residuals: wp.array(dtype=vec3),
    ):
        j = wp.tid()
        f = faces[j]
        r = vec3(zero, zero, zero)
        if f >= 0:
            r = wp.sqrt(weights[j]) * (triangle_point(positions, triangles, f, barycentrics[j]) - points[j])
        residuals[offset + j] = r

    @wp.kernel(module="unique")
    def surface_points_residual_tangents(
        tangents: wp.array(dtype=vec3),
        triangles: wp.array2d(dtype=wp.int32),
        faces: wp.array(dtype=wp.int32),
        barycentrics: wp.array(dtype=vec3),
        weights: wp.array(dtype=dtype),
        offset: int,
        residual_tangents: wp.array(dtype=vec3),
    ):
        j = wp.tid()
        f = faces[j]
        r = vec3(zero, zero, zero)
        if f >= 0:
            r = wp.sqrt(weights[j]) * triangle_point(tangents, triangles, f, barycentrics[j])
        residual_tangents[offset + j] = r

    @wp.kernel(module="unique")
    def weighted_vertex_residual_tangents(
        tangents: wp.array(dtype=vec3),
        weights: wp.array(dtype=dtype),
        residual_tangents: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        residual_tangents[i] = wp.sqrt(weights[i]) * tangents[i]

    return SimpleNamespace(
        convert_to_float32_points=convert_to_float32_points,
        closest_points_on_mesh=closest_points_on_mesh,
        surface_points_squared_distance_sum=surface_points_squared_distance_sum,
        surface_points_residuals=surface_points_residuals,
        surface_points_residual_tangents=surface_points_residual_tangents,
        weighted_vertex_residual_tangents=weighted_vertex_residual_tangents,
    )
