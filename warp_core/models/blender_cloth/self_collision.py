"""The self-collision stage of a substep (``self_collision_kernels``) with its arrays: the
cloth's triangles, which of them Blender leaves out, and the work arrays of the candidate
pairs. Blender's ``cloth_bvh_collision`` finds the self pairs once per substep at the
predicted positions, then in each of its ``collision_quality`` rounds resolves the object
collisions and after them the self collisions, before it moves the predicted positions:
``collision.CollisionStage.launch`` calls :meth:`SelfCollisionStage.prepare` and
:meth:`SelfCollisionStage.round` there, and :meth:`SelfCollisionStage.launch` runs the same
rounds alone for a cloth without colliders."""

from __future__ import annotations

import numpy as np
import warp as wp

from ...mesh import ClothMesh
from .collision import CollisionInputs, CollisionStage, cloth_triangles
from .collision_kernels import KDOP_AXES, collision_kernels
from .params import ClothParams
from .self_collision_grid import BLOCK, bucket_count, self_collision_grid
from .self_collision_kernels import self_collision_kernels
from .topology import SPRING_SEWING, Topology

DEFAULT_SLOTS = 32  # partner triangles a cloth triangle may have per substep, to start with


def vertex_lists(vertex_count: int, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets (N + 1,), partners) of each vertex over the undirected ``pairs`` (E, 2)."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    both = np.concatenate([pairs, pairs[:, ::-1]])
    order = np.lexsort((both[:, 1], both[:, 0]))
    both = both[order]
    counts = np.bincount(both[:, 0], minlength=vertex_count)
    return np.concatenate([[0], np.cumsum(counts)]), both[:, 1]


class SelfCollisionStage:
    """Blender's cloth self-collision for one cloth mesh on one device."""

    def __init__(
        self,
        mesh: ClothMesh,
        settings: ClothParams,
        pinned: np.ndarray,
        sew_edges: np.ndarray,
        dtype: type,
        device: str,
    ) -> None:
        self.kernels = self_collision_kernels(dtype)
        self.shared = collision_kernels(dtype)  # the BVH leaves, predict and update
        self.grid = self_collision_grid(dtype)
        self.dtype = dtype
        self.device = device
        self.settings = settings
        tris = cloth_triangles(mesh)
        n, t = mesh.vertex_count, len(tris)
        excluded = np.zeros(n, bool)
        excluded[list(settings.self_collision_excluded)] = True
        pinned = np.asarray(pinned) != 0

        def ints(a: np.ndarray, dt: type = wp.int32) -> wp.array:
            return wp.array(np.asarray(a, np.int32), dtype=dt, device=device)

        self.tris = ints(tris, wp.vec3i)
        # Blender's CLOTH_VERT_FLAG_NOSELFCOLL and _PINNED on all three corners
        self.tri_excluded = ints(excluded[tris].all(axis=1))
        self.tri_pinned = ints(pinned[tris].all(axis=1))
        sew_offsets, sew_partners = vertex_lists(n, sew_edges)
        self.sew_offsets = ints(sew_offsets)
        self.sew_partners = ints(np.concatenate([sew_partners, [-1]]))  # never empty
        corner_vertex = tris.ravel()
        counts = np.bincount(corner_vertex, minlength=n)
        self.vertex_tri_offsets = ints(np.concatenate([[0], np.cumsum(counts)]))
        self.vertex_tri_corners = ints(np.argsort(corner_vertex, kind="stable"))
        np_float = np.float32 if dtype == wp.float32 else np.float64
        self.tri_epsilon = wp.array(
            np.full(t, settings.self_distance_min, np_float), dtype=dtype, device=device
        )
        self.kdop = wp.zeros((t, 2 * KDOP_AXES), dtype=dtype, device=device)
        # the grid of the candidate search (self_collision_grid)
        h = bucket_count(t)
        self.widest = wp.zeros((t + BLOCK - 1) // BLOCK, dtype=dtype, device=device)
        self.cell = wp.zeros(1, dtype=dtype, device=device)
        self.tri_cell = wp.zeros(t, dtype=wp.vec3i, device=device)
        self.tri_bucket = wp.zeros(t, dtype=wp.int32, device=device)
        self.bucket_size, self.bucket_fill, self.bucket_start = (
            wp.zeros(h, dtype=wp.int32, device=device) for _ in range(3)
        )
        self.bucket_totals = wp.zeros((h + BLOCK - 1) // BLOCK, dtype=wp.int32, device=device)
        self.bucket_tris = wp.zeros(t, dtype=wp.int32, device=device)
        self.candidate_lower = wp.zeros(t, dtype=wp.int32, device=device)
        vec3 = self.kernels.vec3
        # the stage's own prediction, for a cloth without colliders
        self.v_new, self.tx, self.tv, self.dcvel, self.velocity_change = (
            wp.zeros(n, dtype=vec3, device=device) for _ in range(5)
        )
        self.overflow = wp.zeros(1, dtype=wp.int32, device=device)
        self.set_slots(DEFAULT_SLOTS)

    def set_slots(self, slots: int) -> None:
        """Room for ``slots`` partner triangles per cloth triangle."""
        d, t = self.device, self.tris.shape[0]
        vec3 = self.kernels.vec3
        self.slots = int(slots)
        # threads per triangle over its partners: one on the CPU, a slot each on a GPU
        self.lanes = 1 if wp.get_device(d).is_cpu else self.slots
        self.candidate = wp.zeros((t, slots), dtype=wp.int32, device=d)
        self.candidate_count = wp.zeros(t, dtype=wp.int32, device=d)
        self.mirror = wp.zeros((t, slots), dtype=wp.int32, device=d)
        self.pair_active = wp.zeros((t, slots), dtype=wp.int32, device=d)
        self.pair_normal = wp.zeros((t, slots), dtype=vec3, device=d)
        self.pair_distance = wp.zeros((t, slots), dtype=self.dtype, device=d)
        self.pair_aw = wp.zeros((t, slots), dtype=vec3, device=d)
        self.pair_bw = wp.zeros((t, slots), dtype=vec3, device=d)
        self.pair_impulse = wp.zeros((t, slots, 6), dtype=vec3, device=d)

    def start_rollout(self) -> None:
        self.overflow.zero_()

    def overflowed(self) -> bool:
        return bool(self.overflow.numpy()[0])

    def prepare(self, tx: wp.array) -> None:
        """The candidate pairs at the predicted positions ``tx`` (Blender's self BVH, updated
        from ``tx`` without motion, overlapped with itself)."""
        d, t = self.device, self.tris.shape[0]
        sh = self.shared
        wp.launch(sh.kdops, dim=t, device=d, inputs=[self.tris, self.tri_epsilon, tx], outputs=[self.kdop])
        gr, h = self.grid, self.bucket_size.shape[0]
        wp.launch(
            gr.widest_in_block, dim=self.widest.shape[0], device=d, inputs=[self.kdop], outputs=[self.widest]
        )
        wp.launch(gr.cell_size, dim=1, device=d, inputs=[self.widest], outputs=[self.cell])
        wp.launch(gr.clear_buckets, dim=h, device=d, outputs=[self.bucket_size, self.bucket_fill])
        wp.launch(
            gr.file_triangles,
            dim=t,
            device=d,
            inputs=[self.kdop, self.tri_excluded, self.cell],
            outputs=[self.tri_cell, self.tri_bucket, self.bucket_size],
        )
        totals = self.bucket_totals
        wp.launch(gr.block_totals, dim=totals.shape[0], device=d, inputs=[self.bucket_size], outputs=[totals])
        wp.launch(
            gr.bucket_starts,
            dim=totals.shape[0],
            device=d,
            inputs=[self.bucket_size, totals],
            outputs=[self.bucket_start],
        )
        wp.launch(
            gr.scatter,
            dim=t,
            device=d,
            inputs=[self.tri_excluded, self.tri_bucket, self.bucket_start, self.bucket_fill],
            outputs=[self.bucket_tris],
        )
        lists = [self.candidate, self.candidate_count, self.candidate_lower]
        wp.launch(
            gr.candidates,
            dim=t,
            device=d,
            inputs=[
                self.tris,
                self.tri_excluded,
                self.tri_pinned,
                self.sew_offsets,
                self.sew_partners,
                self.kdop,
                self.cell,
                self.tri_cell,
                self.bucket_start,
                self.bucket_size,
                self.bucket_tris,
                self.slots,
            ],
            outputs=[*lists, self.overflow],
        )
        wp.launch(self.kernels.mirrors, dim=t, device=d, inputs=lists, outputs=[self.mirror, self.overflow])

    def round(self, tx: wp.array, tv: wp.array, dcvel: wp.array, h: float) -> None:
        """One round of Blender's ``cloth_bvh_selfcollisions_nearcheck`` at ``tx`` and its
        ``_resolve``: twice the impulses of every pair in contact from the displacements
        ``tv``, each added to ``tv`` and ``dcvel`` (largest per axis per vertex)."""
        k = self.kernels
        d, dt = self.device, self.dtype
        s = self.settings
        t, n = self.tris.shape[0], tv.shape[0]
        eps = dt(s.self_distance_min)
        lanes = self.lanes
        pair = [self.pair_active, self.pair_normal, self.pair_distance, self.pair_aw, self.pair_bw]
        wp.launch(
            k.contacts,
            dim=(t, lanes),
            device=d,
            inputs=[self.tris, self.candidate, self.candidate_count, self.candidate_lower, tx, eps],
            outputs=[*pair, lanes],
        )
        time_multiplier = dt(1.0 / h)
        clamp_sq = dt((s.self_impulse_clamp * h / s.time_scale) ** 2)
        for _pass in range(2):
            wp.launch(
                k.impulses,
                dim=(t, lanes),
                device=d,
                inputs=[
                    self.tris,
                    self.candidate,
                    self.candidate_count,
                    self.candidate_lower,
                    *pair,
                    tv,
                    eps,
                    dt(s.self_friction),
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
                    self.candidate,
                    self.candidate_count,
                    self.candidate_lower,
                    self.mirror,
                    self.pair_impulse,
                ],
                outputs=[tv, dcvel],
            )

    def launch(self, inputs: CollisionInputs, pinned: wp.array) -> tuple[wp.array, wp.array]:
        """A substep's collision response with self collisions only (no colliders), as
        ``CollisionStage.launch``: the velocities after the CG and the impulses' change."""
        sh = self.shared
        d, dt = self.device, self.dtype
        n = inputs.x.shape[0]
        wp.launch(
            sh.predict,
            dim=n,
            device=d,
            inputs=[inputs.x, inputs.v, inputs.dv, dt(inputs.h)],
            outputs=[self.v_new, self.tx, self.tv, self.dcvel],
        )
        self.prepare(self.tx)
        for _round in range(self.settings.collision_quality):
            self.round(self.tx, self.tv, self.dcvel, inputs.h)
            wp.launch(
                sh.move_predicted, dim=n, device=d, inputs=[inputs.x, self.tv, pinned], outputs=[self.tx]
            )
        wp.launch(
            sh.impulse_velocity,
            dim=n,
            device=d,
            inputs=[self.dcvel, pinned, dt(inputs.h)],
            outputs=[self.velocity_change],
        )
        return self.v_new, self.velocity_change


def collision_stages(
    mesh: ClothMesh, settings: ClothParams, topology: Topology, dtype: type, device: str
) -> tuple[CollisionStage | None, SelfCollisionStage | None]:
    """The object-collision stage (with colliders) and the self-collision stage (with Self
    Collisions on) of a cloth, each None where its collisions are off."""
    objects = CollisionStage(mesh, settings, topology.pinned, dtype, device) if settings.colliders else None
    if not settings.use_self_collision:
        return objects, None
    sew_edges = topology.spring_vertices[topology.spring_kind == SPRING_SEWING]
    return objects, SelfCollisionStage(mesh, settings, topology.pinned, sew_edges, dtype, device)
