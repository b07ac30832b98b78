"""The collision stage of a substep (``collision_kernels``) with its arrays: the colliders'
triangles and frame samples on the device, the cloth's triangles, and the work arrays of
the candidate pairs. ``load_frame`` runs before each frame's substeps (outside captured
graphs); ``launch`` between the CG solve and the position update of every substep."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import warp as wp

from ...mesh import ClothMesh
from .collision_kernels import CHUNK, KDOP_AXES, collision_kernels
from .params import ClothParams

DEFAULT_SLOTS = 16  # collider triangles a cloth triangle may meet per substep, to start with
MAX_RECORDED_FRAMES = 4096  # frames with contacts are recorded up to here (later ones: on the last)


@dataclass(frozen=True)
class CollisionInputs:
    """What one substep's collision stage reads besides the stage's own arrays."""

    x: wp.array  # positions at the substep start
    v: wp.array  # velocities the substep started from
    dv: wp.array  # the CG's velocity change
    collider_start: float  # the substep's start and end, as fractions of the frame
    collider_end: float
    h: float


class SelfRounds(Protocol):
    """What the object-collision rounds call of a self-collision stage (``self_collision``)."""

    def prepare(self, tx: wp.array) -> None: ...

    def round(self, tx: wp.array, tv: wp.array, dcvel: wp.array, h: float) -> None: ...


def cloth_triangles(mesh: ClothMesh) -> np.ndarray:
    """Blender's triangles of the cloth (its loop triangles): quads split 0-1-2, 0-2-3.
    Polygons of more corners are triangulated by Blender's polyfill, which is not
    reproduced: refused."""
    polygons = mesh.polygons()
    big = next((p for p, c in enumerate(polygons) if len(c) > 4), None)
    if big is not None:
        raise ValueError(
            f"polygon {big} has {len(polygons[big])} corners: collisions are simulated on triangles and "
            "quads only (triangulate the mesh)"
        )
    return mesh.triangles()


class CollisionStage:
    """Blender's object collisions for one cloth mesh and its colliders on one device."""

    def __init__(
        self, mesh: ClothMesh, settings: ClothParams, pinned: np.ndarray, dtype: type, device: str
    ) -> None:
        colliders = settings.colliders
        self.kernels = collision_kernels(dtype)
        self.dtype = dtype
        self.device = device
        self.settings = settings
        vec3 = self.kernels.vec3
        np_float = np.float32 if dtype == wp.float32 else np.float64
        offsets = np.cumsum([0] + [c.vertex_count for c in colliders])
        frames = max(len(c.positions) for c in colliders)
        positions = np.concatenate([[c.at_frame(k) for k in range(frames)] for c in colliders], axis=1)
        # the collider stands still in the step from frame k to k + 1 (Blender's is_static)
        static = np.ones((frames, len(colliders)), np.int32)
        for o, c in enumerate(colliders):
            for k in range(frames - 1):
                static[k, o] = int(np.array_equal(c.at_frame(k), c.at_frame(k + 1)))
        coll_tris = np.concatenate([c.triangles + off for c, off in zip(colliders, offsets, strict=False)])
        tri_object = np.concatenate([np.full(len(c.triangles), o) for o, c in enumerate(colliders)])
        vertex_object = np.concatenate([np.full(c.vertex_count, o) for o, c in enumerate(colliders)])
        tris = cloth_triangles(mesh)
        excluded = np.zeros(mesh.vertex_count, bool)
        excluded[list(settings.collision_excluded)] = True
        pinned = np.asarray(pinned) != 0
        # Blender skips triangles whose three corners are all pinned or all excluded
        active = ~(pinned[tris].all(axis=1) | excluded[tris].all(axis=1))

        def ints(a: np.ndarray, dt: type = wp.int32) -> wp.array:
            return wp.array(np.asarray(a, np.int32), dtype=dt, device=device)

        def floats(a: list[float]) -> wp.array:
            return wp.array(np.asarray(a, np_float), dtype=dtype, device=device)

        self.frames = frames
        self.frame_positions = wp.array(positions.astype(np_float), dtype=vec3, device=device)
        self.frame_static = ints(static)
        self.object_static = wp.zeros(len(colliders), dtype=wp.int32, device=device)
        self.pos_old = wp.zeros(positions.shape[1], dtype=vec3, device=device)
        self.pos_new = wp.zeros(positions.shape[1], dtype=vec3, device=device)
        self.coll_tris = ints(coll_tris, wp.vec3i)
        self.tri_object = ints(tri_object)
        self.vertex_object = ints(vertex_object)
        self.thickness = floats([c.thickness_outer for c in colliders])
        self.friction = floats([c.friction for c in colliders])
        self.use_culling = ints([int(c.use_culling) for c in colliders])
        self.use_normal = ints([int(c.use_normal) for c in colliders])
        self.cloth_tris = ints(tris, wp.vec3i)
        self.tri_active = ints(active.astype(np.int32))
        corner_vertex = tris.ravel()
        order = np.argsort(corner_vertex, kind="stable")
        counts = np.bincount(corner_vertex, minlength=mesh.vertex_count)
        self.vertex_tri_offsets = ints(np.concatenate([[0], np.cumsum(counts)]))
        self.vertex_tri_corners = ints(order)
        n, nc = mesh.vertex_count, positions.shape[1]
        self.current_xnew = wp.zeros(nc, dtype=vec3, device=device)
        self.current_v = wp.zeros(nc, dtype=vec3, device=device)
        self.collider_kdop = wp.zeros((len(coll_tris), 2 * KDOP_AXES), dtype=dtype, device=device)
        chunks = (len(coll_tris) + CHUNK - 1) // CHUNK
        self.chunk_box = wp.zeros((chunks, 6), dtype=dtype, device=device)
        self.cloth_kdop = wp.zeros((len(tris), 2 * KDOP_AXES), dtype=dtype, device=device)
        self.collider_tri_epsilon = floats([colliders[o].thickness_outer for o in tri_object])
        self.cloth_tri_epsilon = floats([settings.distance_min] * len(tris))
        self.v_new, self.tx, self.tv, self.dcvel, self.velocity_change = (
            wp.zeros(n, dtype=vec3, device=device) for _ in range(5)
        )
        self.overflow = wp.zeros(1, dtype=wp.int32, device=device)
        self.frame_index = wp.zeros(1, dtype=wp.int32, device=device)
        self.vertex_touched = wp.zeros(n, dtype=wp.int32, device=device)
        self.frame_touched = wp.zeros(MAX_RECORDED_FRAMES, dtype=wp.int32, device=device)
        self.set_slots(min(DEFAULT_SLOTS, len(coll_tris)))

    def set_slots(self, slots: int) -> None:
        """Room for ``slots`` candidate collider triangles per cloth triangle."""
        d, t = self.device, self.cloth_tris.shape[0]
        vec3 = self.kernels.vec3
        self.slots = int(slots)
        # threads per cloth triangle over its candidates: one on the CPU, a slot each on a GPU
        self.lanes = 1 if wp.get_device(d).is_cpu else self.slots
        self.candidate = wp.zeros((t, slots), dtype=wp.int32, device=d)
        self.candidate_count = wp.zeros(t, dtype=wp.int32, device=d)
        self.pair_active = wp.zeros((t, slots), dtype=wp.int32, device=d)
        self.pair_normal = wp.zeros((t, slots), dtype=vec3, device=d)
        self.pair_distance = wp.zeros((t, slots), dtype=self.dtype, device=d)
        self.pair_aw = wp.zeros((t, slots), dtype=vec3, device=d)
        self.pair_bw = wp.zeros((t, slots), dtype=vec3, device=d)
        self.pair_impulse = wp.zeros((t, slots, 3), dtype=vec3, device=d)

    def start_rollout(self) -> None:
        """Clear the overflow flag and the contact records (the arrays stay: graphs hold them)."""
        self.overflow.zero_()
        self.vertex_touched.zero_()
        self.frame_touched.zero_()

    def load_frame(self, fi: int) -> None:
        """The colliders' samples at the start and end of frame step ``fi`` (held after the last)."""
        a, b = min(fi, self.frames - 1), min(fi + 1, self.frames - 1)
        wp.copy(self.pos_old, self.frame_positions[a])
        wp.copy(self.pos_new, self.frame_positions[b])
        wp.copy(self.object_static, self.frame_static[a])
        self.frame_index.fill_(min(fi, MAX_RECORDED_FRAMES - 1))

    def overflowed(self) -> bool:
        return bool(self.overflow.numpy()[0])

    def contact_report(self) -> dict:
        """Frames (steps after the start) with a contact, and the vertices that touched."""
        frames = np.flatnonzero(self.frame_touched.numpy())
        return {"frames": [int(f) + 1 for f in frames], "vertices": int(self.vertex_touched.numpy().sum())}

    def launch(
        self, inputs: CollisionInputs, pinned: wp.array, self_stage: SelfRounds | None = None
    ) -> tuple[wp.array, wp.array]:
        """Predict, collide ``collision_quality`` rounds; returns the velocities after the CG
        and the further velocity change the impulses make, for the substep's update. With
        ``self_stage``, each round resolves the self collisions after the object ones, as
        Blender's ``cloth_bvh_collision``."""
        k = self.kernels
        d, dt = self.device, self.dtype
        n = inputs.x.shape[0]
        t = self.cloth_tris.shape[0]
        s = self.settings
        eps1 = dt(s.distance_min)
        wp.launch(
            k.predict,
            dim=n,
            device=d,
            inputs=[inputs.x, inputs.v, inputs.dv, dt(inputs.h)],
            outputs=[self.v_new, self.tx, self.tv, self.dcvel],
        )
        wp.launch(
            k.move_colliders,
            dim=self.pos_old.shape[0],
            device=d,
            inputs=[
                self.pos_old,
                self.pos_new,
                self.vertex_object,
                self.object_static,
                dt(inputs.collider_start),
                dt(inputs.collider_end),
            ],
            outputs=[self.current_xnew, self.current_v],
        )
        wp.launch(
            k.kdops,
            dim=self.coll_tris.shape[0],
            device=d,
            inputs=[self.coll_tris, self.collider_tri_epsilon, self.current_xnew],
            outputs=[self.collider_kdop],
        )
        wp.launch(
            k.kdops,
            dim=t,
            device=d,
            inputs=[self.cloth_tris, self.cloth_tri_epsilon, self.tx],
            outputs=[self.cloth_kdop],
        )
        wp.launch(
            k.chunk_boxes,
            dim=self.chunk_box.shape[0],
            device=d,
            inputs=[self.collider_kdop],
            outputs=[self.chunk_box],
        )
        wp.launch(
            k.candidates,
            dim=t,
            device=d,
            inputs=[self.tri_active, self.cloth_kdop, self.collider_kdop, self.chunk_box, self.slots],
            outputs=[self.candidate, self.candidate_count, self.overflow],
        )
        if self_stage is not None:
            self_stage.prepare(self.tx)
        time_multiplier = dt(1.0 / inputs.h)
        clamp_sq = dt((s.impulse_clamp * inputs.h / s.time_scale) ** 2)
        lanes = self.lanes
        for _round in range(s.collision_quality):
            wp.launch(
                k.contacts,
                dim=(t, lanes),
                device=d,
                inputs=[
                    self.cloth_tris,
                    self.coll_tris,
                    self.tri_object,
                    self.thickness,
                    self.use_culling,
                    self.use_normal,
                    self.candidate,
                    self.candidate_count,
                    self.tx,
                    self.current_xnew,
                    eps1,
                    self.frame_index,
                ],
                outputs=[
                    self.pair_active,
                    self.pair_normal,
                    self.pair_distance,
                    self.pair_aw,
                    self.pair_bw,
                    self.vertex_touched,
                    self.frame_touched,
                    lanes,  # after the outputs, as in the kernel's signature
                ],
            )
            for _pass in range(2):
                wp.launch(
                    k.impulses,
                    dim=(t, lanes),
                    device=d,
                    inputs=[
                        self.cloth_tris,
                        self.coll_tris,
                        self.tri_object,
                        self.thickness,
                        self.friction,
                        self.candidate,
                        self.candidate_count,
                        self.pair_active,
                        self.pair_normal,
                        self.pair_distance,
                        self.pair_aw,
                        self.pair_bw,
                        self.tv,
                        self.current_v,
                        eps1,
                        time_multiplier,
                        clamp_sq,
                    ],
                    outputs=[self.pair_impulse, lanes],
                )
                wp.launch(
                    k.apply_impulses,
                    dim=n,
                    device=d,
                    inputs=[
                        self.vertex_tri_offsets,
                        self.vertex_tri_corners,
                        self.candidate_count,
                        self.pair_impulse,
                    ],
                    outputs=[self.tv, self.dcvel],
                )
            if self_stage is not None:
                self_stage.round(self.tx, self.tv, self.dcvel, inputs.h)
            wp.launch(
                k.move_predicted, dim=n, device=d, inputs=[inputs.x, self.tv, pinned], outputs=[self.tx]
            )
        wp.launch(
            k.impulse_velocity,
            dim=n,
            device=d,
            inputs=[self.dcvel, pinned, dt(inputs.h)],
            outputs=[self.velocity_change],
        )
        return self.v_new, self.velocity_change
