"""Blender's Wind and Force fields acting on cloth (effect.cc and the cloth solver's face
forces), for fields that stand still.

Per vertex and force evaluation Blender sums each field's push (``BKE_effectors_apply``):
the field's Z axis is its normal; a Wind field pushes along it, a Force field away from its
centre (Plane shape: from its plane); the strength is scaled by the effector weights
(``all`` times the field type's), the falloff (Sphere: ``(1 + d - min)^-power`` within the
optional minimum and maximum distance, d from the centre or, Plane shape, from the plane) and
the Z direction, then divided by the scene's frames per second; *Flow* subtracts the
vertex velocity times flow times falloff. The share ``wind_factor`` becomes wind, which acts
only through each triangle's normal; the rest a force. Each triangle spreads both on its
corners (``SIM_mass_spring_force_face_wind`` / ``_extern``: 0.02 * area / 3, a quarter on the
own corner and three quarters over all three). Explicit forces, no Jacobian.

A field is stored as a row of FIELD_COLUMNS floats (ClothParams.force_fields). Noise, other
field types and shapes, Tube and Cone falloffs and absorption are refused before a fit.

No ``from __future__ import annotations``: Warp reads the kernels' annotations.
"""

import functools
from types import SimpleNamespace

import numpy as np
import warp as wp

from .force_kernels import NO_FMA
from .pressure import pressure_kernels

__all__ = ["FIELD_COLUMNS", "FORCE", "PLANE", "POINT", "WIND", "field_kernels", "launch_fields"]

WIND, FORCE = 0.0, 1.0  # field type
POINT, PLANE = 0.0, 1.0  # shape
# z_direction: 0 both, 1 positive, 2 negative
FIELD_COLUMNS = (
    "type", "shape", "origin_x", "origin_y", "origin_z", "normal_x", "normal_y", "normal_z",
    "strength", "flow", "wind_factor", "weight", "z_direction", "use_min", "min_distance",
    "use_max", "max_distance", "power", "gravitation", "apply_to_location",
)  # fmt: skip
_COLUMN = {name: k for k, name in enumerate(FIELD_COLUMNS)}


def field_table(fields: tuple) -> np.ndarray:
    """The fields as an (F, len(FIELD_COLUMNS)) array (F >= 1: a zero row when none)."""
    table = np.zeros((max(len(fields), 1), len(FIELD_COLUMNS)), dtype=np.float64)
    for k, row in enumerate(fields):
        if len(row) != len(FIELD_COLUMNS):
            raise ValueError(f"force field {k} has {len(row)} values, expected {len(FIELD_COLUMNS)}")
        table[k] = row
    return table


@functools.cache
def field_kernels(dtype: type) -> SimpleNamespace:
    vec3 = wp.types.vector(3, dtype)
    c = {name: wp.constant(k) for name, k in _COLUMN.items()}
    TYPE, SHAPE, OX, NX = c["type"], c["shape"], c["origin_x"], c["normal_x"]
    STRENGTH, FLOW, WIND_FACTOR, WEIGHT = c["strength"], c["flow"], c["wind_factor"], c["weight"]
    ZDIR, USE_MIN, MIN_D, USE_MAX, MAX_D = (
        c["z_direction"], c["use_min"], c["min_distance"], c["use_max"], c["max_distance"],
    )  # fmt: skip
    POWER, GRAVITATION, LOCATION = c["power"], c["gravitation"], c["apply_to_location"]
    face_normal_area = pressure_kernels(dtype).face_normal_area  # the triangles pressure uses

    @wp.func
    def falloff_dist(fields: wp.array2d(dtype=dtype), f: int, d: dtype):
        # effect.cc falloff_func
        if fields[f, USE_MAX] != dtype(0.0) and d > fields[f, MAX_D]:
            return dtype(0.0)
        mindist = fields[f, MIN_D]
        if fields[f, USE_MIN] != dtype(0.0):
            if d < mindist:
                return dtype(1.0)
        else:
            mindist = dtype(0.0)
        return wp.pow(dtype(1.0) + d - mindist, -fields[f, POWER])

    @wp.kernel(module="unique", module_options=NO_FMA)
    def vertex_field_push(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        fields: wp.array2d(dtype=dtype),
        field_count: int,
        fps: dtype,
        wind: wp.array(dtype=vec3),
        force: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        p = x[i]
        w_sum = vec3()
        f_sum = vec3()
        for f in range(field_count):
            origin = vec3(fields[f, OX], fields[f, OX + 1], fields[f, OX + 2])
            nor = vec3(fields[f, NX], fields[f, NX + 1], fields[f, NX + 2])
            to_point2 = p - origin
            to_point = to_point2
            if fields[f, SHAPE] == PLANE:
                to_point = nor * wp.dot(to_point2, nor)  # from the closest point on the plane
            distance = wp.length(to_point)
            falloff = fields[f, WEIGHT]
            fac = wp.dot(nor, to_point2)
            if (fields[f, ZDIR] == dtype(1.0) and fac < dtype(0.0)) or (
                fields[f, ZDIR] == dtype(2.0) and fac > dtype(0.0)
            ):
                falloff = dtype(0.0)
            else:
                falloff = falloff * falloff_dist(fields, f, distance)
            if falloff > dtype(0.0):
                strength = fields[f, STRENGTH]
                push = nor * (strength * falloff)
                if fields[f, TYPE] == FORCE:
                    direction = vec3()
                    if distance > dtype(0.0):
                        direction = to_point / distance
                    if fields[f, GRAVITATION] != dtype(0.0):
                        if distance < dtype(1.1920929e-07):
                            strength = dtype(0.0)
                        else:
                            strength = strength * wp.pow(distance, dtype(-2.0))
                    push = direction * (strength * falloff)
                out = vec3()
                if fields[f, LOCATION] != dtype(0.0):
                    out = push * (dtype(1.0) / fps)
                    if fields[f, FLOW] != dtype(0.0):
                        out = out - v[i] * (fields[f, FLOW] * falloff)
                share = fields[f, WIND_FACTOR]
                f_sum = f_sum + out * (dtype(1.0) - share)
                w_sum = w_sum + out * share
        wind[i] = w_sum
        force[i] = f_sum

    @wp.kernel(module="unique", module_options=NO_FMA)
    def face_field_forces(
        x: wp.array(dtype=vec3),
        tris: wp.array(dtype=wp.vec3i),
        vertex_tri_offsets: wp.array(dtype=wp.int32),
        vertex_tri_ids: wp.array(dtype=wp.int32),
        wind: wp.array(dtype=vec3),
        force: wp.array(dtype=vec3),
        field_force: wp.array(dtype=vec3),
    ):
        """Each vertex gathers its triangles' wind and force shares, in triangle order."""
        i = wp.tid()
        out = vec3()
        for e in range(vertex_tri_offsets[i], vertex_tri_offsets[i + 1]):
            tri = tris[vertex_tri_ids[e]]
            nor, area = face_normal_area(x, tri)
            quarter = dtype(0.02) * area / dtype(3.0) / dtype(4.0)
            own = dtype(0.0)
            base = dtype(0.0)
            own_force = vec3()
            base_force = vec3()
            for k in range(3):
                pressure = wp.dot(wind[tri[k]], nor) * quarter
                push = force[tri[k]] * quarter
                base = base + pressure
                base_force = base_force + push
                if tri[k] == i:
                    own = pressure
                    own_force = push
            out = out + nor * (base + own) + (own_force + base_force)
        field_force[i] = out

    return SimpleNamespace(vertex_field_push=vertex_field_push, face_field_forces=face_field_forces)


def launch_fields(arrays, settings, x: wp.array, v: wp.array, buf) -> None:
    """The fields' force on each vertex of the state (x, v), into ``buf.field_force``."""
    fk = field_kernels(arrays.dtype)
    d = arrays.device
    n = arrays.vertex_count
    wp.launch(
        fk.vertex_field_push,
        dim=n,
        device=d,
        inputs=[x, v, arrays.field_table, len(settings.force_fields), arrays.dtype(settings.fps)],
        outputs=[buf.field_wind, buf.field_push],
    )
    wp.launch(
        fk.face_field_forces,
        dim=n,
        device=d,
        inputs=[
            x,
            arrays.pressure_tris,
            arrays.vertex_tri_offsets,
            arrays.vertex_tri_ids,
            buf.field_wind,
            buf.field_push,
        ],
        outputs=[buf.field_force],
    )
