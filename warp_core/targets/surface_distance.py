"""The symmetric point-to-surface distance between a moving cloth and a target mesh of any
topology (:class:`SurfaceDistance`), differentiable on a Warp tape.

The kernels live in :mod:`.loss_kernels`; this module checks arrays and launches them. Every
kernel comes in float32 and float64 (the dtype of the positions array picks it). Loss kernels
accumulate into a one-element array with ``atomic_add`` and are differentiable with
``wp.Tape``.
"""

from typing import Any

import numpy as np
import warp as wp

from .loss_kernels import numpy_float, scalar_type, surface_kernels, vec3_type, vertex_kernels

__all__ = ["SurfaceDistance"]

# Farther than any scene: closest-point queries never give up.
_QUERY_MAX_DISTANCE = 1.0e20


def _same_type(a: Any, b: Any) -> bool:
    return wp.types.types_equal(a, b)


def _normalized_weights(weights: np.ndarray | None, count: int, what: str) -> np.ndarray:
    """``0.5 * w / sum(w)``: each direction contributes half of a weighted mean."""
    w = np.ones(count) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if w.shape != (count,):
        raise ValueError(f"{what} weights must have {count} entries, got {w.shape}")
    if np.any(w < 0.0) or not np.all(np.isfinite(w)) or w.sum() <= 0.0:
        raise ValueError(f"{what} weights must be finite, >= 0 and not all zero")
    return 0.5 * w / w.sum()


class SurfaceDistance:
    """Symmetric point-to-surface distance between a moving cloth mesh and a fixed target mesh.

    ``D(x) = 0.5 * sum_i a_i d(x_i, T)^2 + 0.5 * sum_j b_j d(t_j, S(x))^2`` where ``T`` is
    the target surface, ``S(x)`` the cloth surface, and ``a``, ``b`` the cloth and target
    vertex weights normalised to sum to one (uniform by default): the mean of the two
    directions' mean squared distances, in m^2, so a plane offset by ``d`` gives ``d^2``.

    Each evaluation first finds, without recording on a tape, every cloth vertex's closest
    point on the target (a ``wp.Mesh`` BVH built once) and every target vertex's closest
    cloth triangle and barycentrics (a ``wp.Mesh`` on the cloth positions, refitted each
    time); then differentiable kernels evaluate the distances with those assignments held
    fixed. The assignment is piecewise constant in ``x`` and the distance is stationary in
    the point on the surface, so the gradient is exact wherever the closest point is unique.

    Residuals (for Levenberg–Marquardt), ``3 * (n_cloth + n_target)`` entries, cloth vertices
    first: ``sqrt(0.5 a_i) (x_i - q_i)`` and ``sqrt(0.5 b_j) (p_j(x) - t_j)``, so that
    ``0.5 * |r|^2 = 0.5 * D``. With the assignment fixed they are affine in ``x``; the
    tangent methods apply their Jacobian ``dr/dx`` to a position tangent.

    The BVH queries run in float32 (``wp.Mesh`` takes float32 points only) and pick the
    closest face; the point on that face is recomputed in the positions' dtype.
    Degenerate target or cloth triangles are skipped by the BVH query. The first
    correspondence update builds the cloth BVH (later ones refit it): run one before
    capturing a CUDA graph.
    """

    def __init__(
        self,
        cloth_triangles: np.ndarray,
        cloth_vertex_count: int,
        target_vertices: np.ndarray,
        target_triangles: np.ndarray,
        *,
        dtype: Any = wp.float32,
        device: wp.DeviceLike = None,
        cloth_weights: np.ndarray | None = None,
        target_weights: np.ndarray | None = None,
    ) -> None:
        if dtype not in (wp.float32, wp.float64):
            raise TypeError(f"dtype must be wp.float32 or wp.float64, got {dtype}")
        self.dtype = dtype
        self.vec3 = vec3_type(dtype)
        self.device = wp.get_device(device)
        np_float = numpy_float(dtype)
        cloth_triangles = np.ascontiguousarray(cloth_triangles, dtype=np.int32).reshape(-1, 3)
        target_triangles = np.ascontiguousarray(target_triangles, dtype=np.int32).reshape(-1, 3)
        target_vertices = np.ascontiguousarray(target_vertices, dtype=np.float64).reshape(-1, 3)
        self.cloth_vertex_count = int(cloth_vertex_count)
        self.target_vertex_count = len(target_vertices)
        for name, tris, n in (
            ("cloth", cloth_triangles, self.cloth_vertex_count),
            ("target", target_triangles, self.target_vertex_count),
        ):
            if len(tris) == 0:
                raise ValueError(f"the {name} mesh has no triangles")
            if tris.min() < 0 or tris.max() >= n:
                raise ValueError(f"{name} triangle indices out of range [0, {n})")
        if not np.all(np.isfinite(target_vertices)):
            raise ValueError("target vertices must be finite")

        d = self.device
        self._kernels = surface_kernels(dtype)
        self.cloth_triangles = wp.array(cloth_triangles, dtype=wp.int32, device=d)
        self.target_triangles = wp.array(target_triangles, dtype=wp.int32, device=d)
        self.target_points = wp.array(target_vertices.astype(np_float), dtype=self.vec3, device=d)
        self._target_points_f32 = wp.array(target_vertices.astype(np.float32), dtype=wp.vec3, device=d)
        self._target_mesh = wp.Mesh(points=self._target_points_f32, indices=self.target_triangles.flatten())
        self._cloth_points_f32 = wp.zeros(self.cloth_vertex_count, dtype=wp.vec3, device=d)
        self._cloth_mesh: wp.Mesh | None = None
        self.cloth_weights = wp.array(
            _normalized_weights(cloth_weights, self.cloth_vertex_count, "cloth").astype(np_float),
            dtype=dtype,
            device=d,
        )
        self.target_weights = wp.array(
            _normalized_weights(target_weights, self.target_vertex_count, "target").astype(np_float),
            dtype=dtype,
            device=d,
        )
        nc, nt = self.cloth_vertex_count, self.target_vertex_count
        # cloth vertex -> closest point on the target
        self.cloth_closest_faces = wp.zeros(nc, dtype=wp.int32, device=d)
        self.cloth_closest_barycentrics = wp.zeros(nc, dtype=self.vec3, device=d)
        self.cloth_closest_points = wp.zeros(nc, dtype=self.vec3, device=d)
        # target vertex -> closest point on the cloth
        self.target_closest_faces = wp.zeros(nt, dtype=wp.int32, device=d)
        self.target_closest_barycentrics = wp.zeros(nt, dtype=self.vec3, device=d)
        self._target_closest_points = wp.zeros(nt, dtype=self.vec3, device=d)

    @property
    def residual_count(self) -> int:
        """Length of the flattened residual vector."""
        return 3 * (self.cloth_vertex_count + self.target_vertex_count)

    def set_target_vertices(self, target_vertices: np.ndarray) -> None:
        """Move the target (same triangles, e.g. the next target frame) and refit its BVH."""
        v = np.ascontiguousarray(target_vertices, dtype=np.float64).reshape(-1, 3)
        if len(v) != self.target_vertex_count or not np.all(np.isfinite(v)):
            raise ValueError(f"target vertices must be {self.target_vertex_count} finite points")
        self.target_points.assign(v.astype(numpy_float(self.dtype)))
        self._target_points_f32.assign(v.astype(np.float32))
        self._target_mesh.refit()

    def _as_positions(self, positions: wp.array | np.ndarray) -> wp.array:
        if isinstance(positions, wp.array):
            if scalar_type(positions) != self.dtype:
                raise ValueError(f"positions must be vec3 of {self.dtype.__name__}")
            if len(positions) != self.cloth_vertex_count or positions.device != self.device:
                raise ValueError(f"positions must be {self.cloth_vertex_count} vec3 on {self.device}")
            return positions
        x = np.asarray(positions, dtype=numpy_float(self.dtype)).reshape(-1, 3)
        if len(x) != self.cloth_vertex_count:
            raise ValueError(f"positions must have {self.cloth_vertex_count} vertices, got {len(x)}")
        return wp.array(x, dtype=self.vec3, device=self.device)

    def update_correspondences(self, positions: wp.array) -> None:
        """Find the closest points in both directions for cloth ``positions`` (not taped)."""
        positions = self._as_positions(positions)
        k = self._kernels
        d = self.device
        wp.launch(
            k.closest_points_on_mesh,
            dim=self.cloth_vertex_count,
            inputs=[
                self._target_mesh.id,
                positions,
                self.target_points,
                self.target_triangles,
                _QUERY_MAX_DISTANCE,
            ],
            outputs=[self.cloth_closest_faces, self.cloth_closest_barycentrics, self.cloth_closest_points],
            device=d,
            record_tape=False,
        )
        wp.launch(
            k.convert_to_float32_points,
            dim=self.cloth_vertex_count,
            inputs=[positions],
            outputs=[self._cloth_points_f32],
            device=d,
            record_tape=False,
        )
        if self._cloth_mesh is None:
            self._cloth_mesh = wp.Mesh(points=self._cloth_points_f32, indices=self.cloth_triangles.flatten())
        else:
            self._cloth_mesh.refit()
        wp.launch(
            k.closest_points_on_mesh,
            dim=self.target_vertex_count,
            inputs=[
                self._cloth_mesh.id,
                self.target_points,
                positions,
                self.cloth_triangles,
                _QUERY_MAX_DISTANCE,
            ],
            outputs=[
                self.target_closest_faces,
                self.target_closest_barycentrics,
                self._target_closest_points,
            ],
            device=d,
            record_tape=False,
        )

    def _check_residual_array(self, array: wp.array, like: wp.array, name: str) -> None:
        if (
            not _same_type(array.dtype, like.dtype)
            or len(array) != self.cloth_vertex_count + self.target_vertex_count
        ):
            raise ValueError(f"{name} must be n_cloth + n_target vec3 of the positions' dtype")

    def _launch_both_directions(
        self,
        out: wp.array,
        cloth_kernel: Any,
        cloth_inputs: list,
        target_kernel: Any,
        points: wp.array,
        target_inputs: list,
    ) -> None:
        """Launch ``cloth_kernel`` over the cloth vertices, then ``target_kernel`` over the
        target vertices with the last correspondences (``points``, cloth triangles, closest
        faces and barycentrics, then ``target_inputs``); both write into ``out``."""
        wp.launch(
            cloth_kernel, dim=self.cloth_vertex_count, inputs=cloth_inputs, outputs=[out], device=self.device
        )
        wp.launch(
            target_kernel,
            dim=self.target_vertex_count,
            inputs=[
                points,
                self.cloth_triangles,
                self.target_closest_faces,
                self.target_closest_barycentrics,
                *target_inputs,
            ],
            outputs=[out],
            device=self.device,
        )

    def launch_loss(
        self, positions: wp.array, loss: wp.array, scale: float = 1.0, update: bool = True
    ) -> None:
        """``loss[0] += scale * D(x)``, differentiable w.r.t. ``positions`` (1-D vec3 array).

        ``update=False`` reuses the correspondences of the last :meth:`update_correspondences`.
        """
        positions = self._as_positions(positions)
        if loss.dtype != self.dtype:
            raise ValueError("loss must have the positions' scalar dtype")
        if update:
            self.update_correspondences(positions)
        scale = self.dtype(scale)
        self._launch_both_directions(
            loss,
            vertex_kernels(self.dtype).weighted_squared_distance_sum,
            [positions, self.cloth_closest_points, self.cloth_weights, scale],
            self._kernels.surface_points_squared_distance_sum,
            positions,
            [self.target_points, self.target_weights, scale],
        )

    def launch_residuals(self, positions: wp.array, residuals: wp.array, update: bool = True) -> None:
        """Residuals as a vec3 array of length ``n_cloth + n_target`` (see the class docstring)."""
        positions = self._as_positions(positions)
        self._check_residual_array(residuals, positions, "residuals")
        if update:
            self.update_correspondences(positions)
        self._launch_both_directions(
            residuals,
            vertex_kernels(self.dtype).weighted_vertex_residuals,
            [positions, self.cloth_closest_points, self.cloth_weights],
            self._kernels.surface_points_residuals,
            positions,
            [self.target_points, self.target_weights, self.cloth_vertex_count],
        )

    def launch_residual_tangents(self, tangents: wp.array, residual_tangents: wp.array) -> None:
        """``dr = (dr/dx) dx`` for a position tangent, with the last correspondences fixed."""
        tangents = self._as_positions(tangents)
        self._check_residual_array(residual_tangents, tangents, "residual_tangents")
        self._launch_both_directions(
            residual_tangents,
            self._kernels.weighted_vertex_residual_tangents,
            [tangents, self.cloth_weights],
            self._kernels.surface_points_residual_tangents,
            tangents,
            [self.target_weights, self.cloth_vertex_count],
        )

    def _residual_vector(self, launch: Any, x: wp.array | np.ndarray) -> np.ndarray:
        out = wp.zeros(
            self.cloth_vertex_count + self.target_vertex_count, dtype=self.vec3, device=self.device
        )
        launch(x, out)
        return out.numpy().astype(np.float64).ravel()

    def residuals(self, positions: wp.array | np.ndarray) -> np.ndarray:
        """Flattened residual vector (float64) for cloth positions; updates correspondences."""
        return self._residual_vector(self.launch_residuals, positions)

    def residual_tangents(self, tangents: wp.array | np.ndarray) -> np.ndarray:
        """Flattened ``(dr/dx) dx`` (float64), with the correspondences of the last update."""
        return self._residual_vector(self.launch_residual_tangents, tangents)

    def value(self, positions: wp.array | np.ndarray) -> float:
        """``D(x)`` as a float (updates correspondences)."""
        loss = wp.zeros(1, dtype=self.dtype, device=self.device)
        self.launch_loss(positions, loss)
        return float(loss.numpy()[0])

    def mean_squared_distances(self, positions: wp.array | np.ndarray) -> tuple[float, float]:
        """(cloth -> target, target -> cloth) weighted mean squared distances, for reports."""
        r = self.residuals(positions).reshape(-1, 3)
        nc = self.cloth_vertex_count
        # residual rows carry sqrt(0.5 * normalised weight): undo the 0.5
        return 2.0 * float(np.sum(r[:nc] ** 2)), 2.0 * float(np.sum(r[nc:] ** 2))
