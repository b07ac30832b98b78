"""The arrays of one cloth mesh on one device, built once from the mesh and its springs and
hinges. Nothing here changes with the parameters; during a rollout only the rest shape
does, and only with a dynamic mesh (:meth:`ClothArrays.update_rest`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from ...mesh import ClothMesh
from ...tape import suspended_tape
from .fields import field_table
from .force_kernels import force_kernels
from .pressure import pressure_kernels, pressure_tables
from .topology import Topology, vertex_tables


@dataclass(frozen=True)
class ClothArrays:
    """Rest state, springs, hinges, pins and per-vertex gather tables as Warp arrays.

    Index arrays are int32; positions are vec3 and lengths/angles scalars of ``dtype``.
    """

    device: str
    dtype: type  # wp.float32 or wp.float64
    vertex_count: int
    spring_count: int
    hinge_count: int
    rest_positions: wp.array  # (N,) vec3, the mesh as given
    spring_vertices: wp.array  # (S,) vec2i
    spring_kind: wp.array  # (S,) int32, topology.SPRING_*
    hinge_vertices: wp.array  # (H,) vec2i, the hinge axis
    hinge_spring: wp.array  # (H,) int32, the spring whose rest length scales the hinge
    hinge_face_a: wp.array  # (H,) vec2i, (start, count) into hinge_face_vertices
    hinge_face_b: wp.array  # (H,) vec2i
    hinge_face_vertices: wp.array  # int32
    pinned: wp.array  # (N,) int32, nonzero where the vertex moves with its pin goal
    goal_weight: wp.array  # (N,) dtype, soft goal spring weight
    spring_lin_stiffness: wp.array  # (S,) dtype, stiffness-group weight of each spring
    hinge_ang_stiffness: wp.array  # (H,) dtype, bending-group weight of each hinge
    # per-vertex tables: every sum over a vertex's springs and hinges runs in one fixed
    # order, the same on every device
    vertex_spring_offsets: wp.array  # (N + 1,) int32
    vertex_spring_ids: wp.array  # int32
    vertex_spring_other: wp.array  # int32, the spring's other vertex
    vertex_spring_sign: wp.array  # int32, +1 or -1: the spring force's direction at this vertex
    vertex_hinge_offsets: wp.array  # (N + 1,) int32
    vertex_hinge_ids: wp.array  # int32
    vertex_hinge_roles: wp.array  # int32 bit mask: in face a, in face b, on the hinge axis
    spring_rest_length: wp.array  # (S,) dtype
    hinge_rest_angle: wp.array  # (H,) dtype
    avg_spring_length: float  # mean structural (shrunk) rest length; scales the spring stiffnesses
    # (1,) dtype: 1 / the mean structural rest length as the kernels read it (a device value,
    # so a rest shape that follows the animated mesh can change it between frames)
    inv_avg_spring_length: wp.array
    spring_shrink: wp.array  # (S,) dtype, each spring's shrink factor (0 for sewing)
    # pressure: Blender's triangles, each vertex's triangles, and the volume it returns to
    # (empty and unused without pressure)
    pressure_tris: wp.array  # (T,) vec3i
    vertex_tri_offsets: wp.array  # (N + 1,) int32
    vertex_tri_ids: wp.array  # int32
    initial_volume: wp.array  # (1,) dtype
    field_table: wp.array  # (F, FIELD_COLUMNS) dtype, the force fields (a zero row when none)
    # a batch (``batch.py``): this many copies of one mesh, one after the other in every array
    members: int = 1

    @property
    def member_vertices(self) -> int:
        return self.vertex_count // self.members

    @classmethod
    def build(
        cls,
        mesh: ClothMesh,
        top: Topology,
        dtype: type,
        device: str,
        pressure_volume: float | None = None,
        force_fields: tuple = (),
    ) -> ClothArrays:
        """Upload the mesh and topology and measure rest lengths and angles on ``device``.
        ``pressure_volume``: with pressure, the volume it returns to (0: the rest mesh's);
        None without pressure."""
        fk = force_kernels(dtype)
        np_float = np.float32 if dtype == wp.float32 else np.float64
        d = device
        n = mesh.vertex_count
        n_springs = len(top.spring_kind)
        n_hinges = len(top.hinge_spring)

        def ints(values: np.ndarray, dtype: type = wp.int32) -> wp.array:
            return wp.array(values, dtype=dtype, device=d)

        rest_positions = wp.array(mesh.vertices.astype(np_float), dtype=fk.vec3, device=d)
        spring_vertices = ints(top.spring_vertices, wp.vec2i)
        spring_kind = ints(top.spring_kind)
        hinge_vertices = ints(top.hinge_vertices, wp.vec2i)
        hinge_spring = ints(top.hinge_spring)
        hinge_face_a = ints(top.hinge_face_a, wp.vec2i)
        hinge_face_b = ints(top.hinge_face_b, wp.vec2i)
        hinge_face_vertices = ints(top.hinge_face_vertices)
        pinned = ints(top.pinned)
        spring_table, hinge_table = vertex_tables(top, n)
        spring_offsets, spring_ids, spring_other, spring_sign = (ints(a) for a in spring_table)
        hinge_offsets, hinge_ids, hinge_roles = (ints(a) for a in hinge_table)
        goal_weight = wp.array(top.goal_weight.astype(np_float), dtype=dtype, device=d)
        spring_lin_stiffness = wp.array(top.spring_lin_stiffness.astype(np_float), dtype=dtype, device=d)
        hinge_ang_stiffness = wp.array(top.hinge_ang_stiffness.astype(np_float), dtype=dtype, device=d)
        spring_shrink = wp.array(top.spring_shrink.astype(np_float), dtype=dtype, device=d)
        spring_rest_length = wp.zeros(n_springs, dtype=dtype, device=d)
        hinge_rest_angle = wp.zeros(n_hinges, dtype=dtype, device=d)
        with suspended_tape():
            wp.launch(
                fk.spring_rest_lengths,
                dim=n_springs,
                device=d,
                inputs=[rest_positions, spring_vertices, spring_shrink],
                outputs=[spring_rest_length],
            )
            if n_hinges:
                wp.launch(
                    fk.hinge_rest_angles,
                    dim=n_hinges,
                    device=d,
                    inputs=[rest_positions, hinge_vertices, hinge_face_a, hinge_face_b, hinge_face_vertices],
                    outputs=[hinge_rest_angle],
                )
        if pressure_volume is None and not force_fields:
            tris, tri_offsets, tri_ids = (
                np.zeros((0, 3), np.int32),
                np.zeros(n + 1, np.int32),
                np.zeros(0, np.int32),
            )
        else:
            tris, tri_offsets, tri_ids = pressure_tables(mesh)
        pressure_tris = wp.array(tris, dtype=wp.vec3i, device=d)
        initial_volume = wp.array([pressure_volume or 0.0], dtype=dtype, device=d)
        if pressure_volume == 0.0:  # the rest mesh's volume, as Blender measures it
            with suspended_tape():
                wp.launch(
                    pressure_kernels(dtype).mesh_volume,
                    dim=1,
                    device=d,
                    inputs=[rest_positions, pressure_tris],
                    outputs=[initial_volume],
                )
        rest = spring_rest_length.numpy().astype(np.float64)
        structural = top.structural_mask
        avg = float(rest[structural].mean()) if structural.any() else 1.0
        return cls(
            device=d,
            dtype=dtype,
            vertex_count=n,
            spring_count=n_springs,
            hinge_count=n_hinges,
            rest_positions=rest_positions,
            spring_vertices=spring_vertices,
            spring_kind=spring_kind,
            hinge_vertices=hinge_vertices,
            hinge_spring=hinge_spring,
            hinge_face_a=hinge_face_a,
            hinge_face_b=hinge_face_b,
            hinge_face_vertices=hinge_face_vertices,
            pinned=pinned,
            goal_weight=goal_weight,
            spring_lin_stiffness=spring_lin_stiffness,
            hinge_ang_stiffness=hinge_ang_stiffness,
            vertex_spring_offsets=spring_offsets,
            vertex_spring_ids=spring_ids,
            vertex_spring_other=spring_other,
            vertex_spring_sign=spring_sign,
            vertex_hinge_offsets=hinge_offsets,
            vertex_hinge_ids=hinge_ids,
            vertex_hinge_roles=hinge_roles,
            spring_rest_length=spring_rest_length,
            hinge_rest_angle=hinge_rest_angle,
            avg_spring_length=avg,
            inv_avg_spring_length=wp.array([1.0 / avg], dtype=dtype, device=d),
            spring_shrink=spring_shrink,
            pressure_tris=pressure_tris,
            vertex_tri_offsets=ints(tri_offsets),
            vertex_tri_ids=ints(tri_ids),
            initial_volume=initial_volume,
            field_table=wp.array(field_table(force_fields), dtype=dtype, device=d),
        )

    def update_rest(self, positions: wp.array) -> None:
        """Rest lengths (shrunk), rest angles and the mean structural length measured on
        ``positions``: Blender's dynamic mesh does this every frame on the input mesh."""
        fk = force_kernels(self.dtype)
        d = self.device
        wp.launch(
            fk.spring_rest_lengths,
            dim=self.spring_count,
            device=d,
            inputs=[positions, self.spring_vertices, self.spring_shrink],
            outputs=[self.spring_rest_length],
        )
        wp.launch(
            fk.structural_mean_inverse,
            dim=1,
            device=d,
            inputs=[self.spring_rest_length, self.spring_kind],
            outputs=[self.inv_avg_spring_length],
        )
        if self.hinge_count:
            wp.launch(
                fk.hinge_rest_angles,
                dim=self.hinge_count,
                device=d,
                inputs=[
                    positions,
                    self.hinge_vertices,
                    self.hinge_face_a,
                    self.hinge_face_b,
                    self.hinge_face_vertices,
                ],
                outputs=[self.hinge_rest_angle],
            )
