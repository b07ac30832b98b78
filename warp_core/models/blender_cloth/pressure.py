"""Blender's cloth pressure (``use_pressure``): a uniform pressure on a closed mesh that also
pushes back towards its rest (or target) volume.

Per force evaluation Blender measures the volume V of the triangulated mesh (the signed
tetrahedra to the origin), takes ``pressure = V0 / V - 1`` (capped at ``|uniform| + 200``),
adds ``uniform_pressure_force``, multiplies by ``pressure_factor``, and applies
``normal * pressure * area / 3`` to each corner of each triangle: an explicit force, with no
Jacobian in the implicit step. V0 is ``target_volume`` with *Custom Volume*, else the rest
mesh's volume. Triangles are Blender's: a quad splits along its first diagonal (corners
0-1-2 and 0-2-3); polygons of more corners are refused with pressure (Blender fills them with
its own polyfill).

No ``from __future__ import annotations``: Warp reads the kernels' annotations, which name
the local vector type.
"""

import functools
from types import SimpleNamespace

import numpy as np
import warp as wp

from ...mesh import ClothMesh
from .force_kernels import NO_FMA

__all__ = ["launch_pressure", "pressure_kernels", "pressure_tables"]


def pressure_tables(mesh: ClothMesh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(triangles (T, 3), per-vertex offsets (N + 1), triangle ids): Blender's triangles in
    polygon order, and for each vertex the triangles it is a corner of, in triangle order.
    Pressure and the force fields' face forces act on them."""
    tris: list[tuple[int, int, int]] = []
    for p, c in enumerate(mesh.polygons()):
        if len(c) > 4:
            raise ValueError(
                f"polygon {p} has {len(c)} corners: pressure and force fields are simulated on "
                "triangles and quads only (triangulate the mesh)"
            )
        tris.append((int(c[0]), int(c[1]), int(c[2])))
        if len(c) == 4:
            tris.append((int(c[0]), int(c[2]), int(c[3])))
    t = np.array(tris, dtype=np.int32).reshape(-1, 3)
    vertex = t.ravel()
    tri = np.repeat(np.arange(len(t)), 3)
    order = np.lexsort((tri, vertex))
    offsets = np.concatenate([[0], np.cumsum(np.bincount(vertex, minlength=mesh.vertex_count))])
    return t, offsets.astype(np.int32), tri[order].astype(np.int32)


@functools.cache
def pressure_kernels(dtype: type) -> SimpleNamespace:
    vec3 = wp.types.vector(3, dtype)

    @wp.func
    def volume_6x(x: wp.array(dtype=vec3), tris: wp.array(dtype=wp.vec3i)):
        # one thread, triangles in order (Blender's volume_tri_tetrahedron_signed_v3_6x)
        total = dtype(0.0)
        for t in range(tris.shape[0]):
            tri = tris[t]
            total = total + wp.dot(wp.cross(x[tri[0]], x[tri[1]]), x[tri[2]])
        return total

    @wp.func
    def face_normal_area(x: wp.array(dtype=vec3), tri: wp.vec3i):
        # Blender's calc_nor_area_tri: n = (v1 - v2) x (v2 - v3), area = |n| / 2 (no normal
        # for a degenerate triangle)
        n = wp.cross(x[tri[0]] - x[tri[1]], x[tri[1]] - x[tri[2]])
        length = wp.length(n)
        nor = vec3()
        if length > dtype(0.0):
            nor = n / length
        return nor, length / dtype(2.0)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def mesh_volume(x: wp.array(dtype=vec3), tris: wp.array(dtype=wp.vec3i), volume: wp.array(dtype=dtype)):
        volume[0] = volume_6x(x, tris) / dtype(6.0)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def pressure_difference(
        x: wp.array(dtype=vec3),
        tris: wp.array(dtype=wp.vec3i),
        initial_volume: wp.array(dtype=dtype),
        uniform: dtype,
        factor: dtype,
        pressure: wp.array(dtype=dtype),
    ):
        p = dtype(0.0)
        v0 = initial_volume[0]
        if v0 > dtype(1.0e-6):
            p = v0 / (volume_6x(x, tris) / dtype(6.0)) - dtype(1.0)
            p = wp.min(p, wp.abs(uniform) + dtype(200.0))
        p = (p + uniform) * factor
        if wp.abs(p) <= dtype(1.0e-6):  # Blender applies no pressure below this
            p = dtype(0.0)
        pressure[0] = p

    @wp.kernel(module="unique", module_options=NO_FMA)
    def pressure_forces(
        x: wp.array(dtype=vec3),
        tris: wp.array(dtype=wp.vec3i),
        vertex_tri_offsets: wp.array(dtype=wp.int32),
        vertex_tri_ids: wp.array(dtype=wp.int32),
        pressure: wp.array(dtype=dtype),
        pressure_force: wp.array(dtype=vec3),
    ):
        """Each vertex gathers its triangles' share, in triangle order (no atomics)."""
        i = wp.tid()
        p = pressure[0]
        f = vec3()
        for e in range(vertex_tri_offsets[i], vertex_tri_offsets[i + 1]):
            nor, area = face_normal_area(x, tris[vertex_tri_ids[e]])
            f = f + nor * (p * (area / dtype(3.0)))
        pressure_force[i] = f

    return SimpleNamespace(
        face_normal_area=face_normal_area,
        mesh_volume=mesh_volume,
        pressure_difference=pressure_difference,
        pressure_forces=pressure_forces,
    )


def launch_pressure(arrays, settings, x: wp.array, buf) -> None:
    """The pressure of the state ``x`` and each vertex's pressure force, into ``buf``
    (``buf.pressure``, ``buf.pressure_force``); ``arrays`` are the cloth's ClothArrays."""
    pk = pressure_kernels(arrays.dtype)
    dt = arrays.dtype
    wp.launch(
        pk.pressure_difference,
        dim=1,
        device=arrays.device,
        inputs=[
            x,
            arrays.pressure_tris,
            arrays.initial_volume,
            dt(settings.uniform_pressure_force),
            dt(settings.pressure_factor),
        ],
        outputs=[buf.pressure],
    )
    wp.launch(
        pk.pressure_forces,
        dim=arrays.vertex_count,
        device=arrays.device,
        inputs=[x, arrays.pressure_tris, arrays.vertex_tri_offsets, arrays.vertex_tri_ids, buf.pressure],
        outputs=[buf.pressure_force],
    )
