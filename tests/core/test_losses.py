"""Loss kernels: values against numpy, gradients against finite differences."""

import numpy as np
import pytest
import warp as wp

from warp_core.mesh import grid_mesh
from warp_core.targets.surface_distance import SurfaceDistance
from warp_core.targets.vertex import launch_vertex_distance_loss, launch_vertex_residuals, vertex_residuals

wp.config.log_level = wp.LOG_WARNING  # no module-load messages

DTYPES = [wp.float32, wp.float64]
VEC3 = {wp.float32: wp.vec3f, wp.float64: wp.vec3d}
NP = {wp.float32: np.float32, wp.float64: np.float64}


def grid_surface(
    nx: int, ny: int, size: float = 1.0, flip_diagonal: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangles of an ``nx`` x ``ny`` grid in the XY plane."""
    mesh = grid_mesh(nx, ny, size, size, triangulate=True)
    tris = np.array(mesh.polygons(), dtype=np.int32)
    if flip_diagonal:  # split every quad along the other diagonal
        quads = np.array(grid_mesh(nx, ny, size, size).polygons(), dtype=np.int32)
        tris = np.concatenate([quads[:, [0, 1, 3]], quads[:, [1, 2, 3]]])
    return mesh.vertices.copy(), tris


def vertex_loss_value(x: np.ndarray, t: np.ndarray, w: np.ndarray, dtype, scale: float) -> float:
    loss = wp.zeros(1, dtype=dtype)
    launch_vertex_distance_loss(
        wp.array(x, dtype=VEC3[dtype]), wp.array(t, dtype=VEC3[dtype]), wp.array(w, dtype=dtype), loss, scale
    )
    return float(loss.numpy()[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_vertex_distance_loss_value_matches_numpy(dtype) -> None:
    rng = np.random.default_rng(0)
    x, t = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    w = rng.uniform(0.0, 2.0, size=50)
    expected = 0.7 * np.sum(w * np.sum((x - t) ** 2, axis=1))
    rtol = 1e-5 if dtype == wp.float32 else 1e-12
    assert vertex_loss_value(x, t, w, dtype, 0.7) == pytest.approx(expected, rel=rtol)

    # residuals: 0.5 |r|^2 equals the loss with scale 0.5
    r = vertex_residuals(x, t, w)
    assert r.shape == (150,)
    assert 0.5 * r @ r == pytest.approx(vertex_loss_value(x, t, w, dtype, 0.5), rel=rtol)
    out = wp.zeros(50, dtype=VEC3[dtype])
    launch_vertex_residuals(
        wp.array(x, dtype=VEC3[dtype]), wp.array(t, dtype=VEC3[dtype]), wp.array(w, dtype=dtype), out
    )
    np.testing.assert_allclose(out.numpy().ravel(), r, rtol=rtol, atol=1e-6)


def test_vertex_distance_loss_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(1)
    x0, t = rng.normal(size=(20, 3)), rng.normal(size=(20, 3))
    w = rng.uniform(0.1, 2.0, size=20)
    positions = wp.array(x0, dtype=wp.vec3d, requires_grad=True)
    loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        launch_vertex_distance_loss(
            positions, wp.array(t, dtype=wp.vec3d), wp.array(w, dtype=wp.float64), loss, 0.3
        )
    tape.backward(loss)
    grad = positions.grad.numpy()

    h = 1e-6
    fd = np.zeros_like(x0)
    for i in range(20):
        for c in range(3):
            xp, xm = x0.copy(), x0.copy()
            xp[i, c] += h
            xm[i, c] -= h
            fd[i, c] = (
                vertex_loss_value(xp, t, w, wp.float64, 0.3) - vertex_loss_value(xm, t, w, wp.float64, 0.3)
            ) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-8)
    np.testing.assert_allclose(grad, 0.6 * w[:, None] * (x0 - t), rtol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_plane_offset_by_d_gives_d_squared(dtype) -> None:
    d = 0.03
    cloth_v, cloth_t = grid_surface(6, 6)
    target_v, target_t = grid_surface(9, 9)
    target_v[:, 2] += d
    sd = SurfaceDistance(cloth_t, len(cloth_v), target_v, target_t, dtype=dtype)
    rtol = 1e-5 if dtype == wp.float32 else 1e-10
    assert sd.value(cloth_v) == pytest.approx(d * d, rel=rtol)
    c2t, t2c = sd.mean_squared_distances(cloth_v)
    assert c2t == pytest.approx(d * d, rel=rtol)
    assert t2c == pytest.approx(d * d, rel=rtol)
    r = sd.residuals(cloth_v)
    assert r.shape == (sd.residual_count,)
    assert 0.5 * r @ r == pytest.approx(0.5 * d * d, rel=rtol)


def test_remeshed_copy_of_same_surface_gives_zero_distance() -> None:
    # piecewise-planar surface (a crease along x = 0 and a tilt in y): every triangulation
    # whose vertices include the crease line represents it exactly
    def shape(v: np.ndarray) -> np.ndarray:
        v = v.copy()
        v[:, 2] = 0.3 * np.abs(v[:, 0]) + 0.2 * v[:, 1]
        return v

    cloth_v, cloth_t = grid_surface(5, 5)
    target_v, target_t = grid_surface(9, 9, flip_diagonal=True)  # subdivided and split the other way
    sd = SurfaceDistance(cloth_t, len(cloth_v), shape(target_v), target_t, dtype=wp.float64)
    assert sd.value(shape(cloth_v)) < 1e-24
    # and a visible offset is visible
    moved = shape(cloth_v)
    moved[:, 2] += 0.01
    assert sd.value(moved) > 1e-5


def bumpy_pair(dtype) -> tuple[SurfaceDistance, np.ndarray]:
    """A perturbed cloth grid and a smaller, bumpy, differently meshed target."""
    rng = np.random.default_rng(3)
    cloth_v, cloth_t = grid_surface(6, 6, size=1.0)
    cloth_v[:, 2] = 0.05 + 0.02 * rng.normal(size=len(cloth_v))
    cloth_v[:, :2] += 0.02 * rng.normal(size=(len(cloth_v), 2))
    target_v, target_t = grid_surface(8, 7, size=0.9, flip_diagonal=True)
    target_v[:, 2] = 0.1 * np.sin(3.0 * target_v[:, 0]) * np.cos(2.0 * target_v[:, 1])
    weights = rng.uniform(0.5, 1.5, size=len(cloth_v))
    sd = SurfaceDistance(cloth_t, len(cloth_v), target_v, target_t, dtype=dtype, cloth_weights=weights)
    return sd, cloth_v


def tape_gradient(sd: SurfaceDistance, x: np.ndarray, dtype, scale: float = 1.0) -> tuple[float, np.ndarray]:
    positions = wp.array(x, dtype=VEC3[dtype], requires_grad=True)
    loss = wp.zeros(1, dtype=dtype, requires_grad=True)
    tape = wp.Tape()
    with tape:
        sd.launch_loss(positions, loss, scale=scale)
    tape.backward(loss)
    return float(loss.numpy()[0]), positions.grad.numpy().astype(np.float64)


def test_surface_distance_gradient_via_tape_matches_finite_differences() -> None:
    sd, x0 = bumpy_pair(wp.float64)
    value, grad = tape_gradient(sd, x0, wp.float64, scale=2.0)
    assert value == pytest.approx(2.0 * sd.value(x0), rel=1e-12)
    h = 1e-6
    fd = np.zeros_like(x0)
    for i in range(len(x0)):
        for c in range(3):
            xp, xm = x0.copy(), x0.copy()
            xp[i, c] += h
            xm[i, c] -= h
            fd[i, c] = 2.0 * (sd.value(xp) - sd.value(xm)) / (2 * h)
    scale = np.abs(fd).max()
    assert scale > 1e-3
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-4 * scale)


def test_surface_distance_float32_gradient_matches_float64() -> None:
    sd64, x0 = bumpy_pair(wp.float64)
    sd32, _ = bumpy_pair(wp.float32)
    v64, g64 = tape_gradient(sd64, x0, wp.float64)
    v32, g32 = tape_gradient(sd32, x0, wp.float32)
    assert v32 == pytest.approx(v64, rel=1e-4)
    np.testing.assert_allclose(g32, g64, rtol=1e-3, atol=1e-4 * np.abs(g64).max())


def test_surface_residuals_and_tangents_are_consistent() -> None:
    sd, x0 = bumpy_pair(wp.float64)
    r = sd.residuals(x0)
    assert 0.5 * r @ r == pytest.approx(0.5 * sd.value(x0), rel=1e-12)
    _, grad = tape_gradient(sd, x0, wp.float64)

    rng = np.random.default_rng(5)
    dx = rng.normal(size=x0.shape)
    sd.update_correspondences(wp.array(x0, dtype=wp.vec3d))
    dr = sd.residual_tangents(dx)
    # d(0.5 |r|^2) = r . dr equals the gradient of 0.5 D along dx
    assert r @ dr == pytest.approx(0.5 * np.sum(grad * dx), rel=1e-9)

    # with the correspondences fixed the residuals are affine in x: the tangent is exact
    h = 1e-3
    out = wp.zeros(sd.residual_count // 3, dtype=wp.vec3d)
    sd.launch_residuals(wp.array(x0 + h * dx, dtype=wp.vec3d), out, update=False)
    rp = out.numpy().ravel().copy()
    sd.launch_residuals(wp.array(x0 - h * dx, dtype=wp.vec3d), out, update=False)
    rm = out.numpy().ravel()
    np.testing.assert_allclose((rp - rm) / (2 * h), dr, rtol=1e-8, atol=1e-12)


def test_input_validation() -> None:
    cloth_v, cloth_t = grid_surface(3, 3)
    with pytest.raises(ValueError, match="out of range"):
        SurfaceDistance(cloth_t, 4, cloth_v, cloth_t)
    sd = SurfaceDistance(cloth_t, len(cloth_v), cloth_v, cloth_t, dtype=wp.float64)
    with pytest.raises(ValueError, match="float64"):
        sd.launch_loss(wp.zeros(len(cloth_v), dtype=wp.vec3f), wp.zeros(1, dtype=wp.float64))
    with pytest.raises(ValueError, match="weights"):
        launch_vertex_distance_loss(
            wp.zeros(3, dtype=wp.vec3d),
            wp.zeros(3, dtype=wp.vec3d),
            wp.zeros(3, dtype=wp.float32),
            wp.zeros(1, dtype=wp.float64),
        )
    with pytest.raises(TypeError, match="vec3"):
        launch_vertex_distance_loss(
            wp.zeros(3, dtype=wp.float64),
            wp.zeros(3, dtype=wp.float64),
            wp.zeros(3, dtype=wp.float64),
            wp.zeros(1, dtype=wp.float64),
        )


def test_set_target_vertices_moves_the_target() -> None:
    cloth_v, cloth_t = grid_surface(4, 4)
    target_v, target_t = grid_surface(5, 5)
    sd = SurfaceDistance(cloth_t, len(cloth_v), target_v, target_t, dtype=wp.float64)
    assert sd.value(cloth_v) < 1e-24
    target_v[:, 2] += 0.2
    sd.set_target_vertices(target_v)
    assert sd.value(cloth_v) == pytest.approx(0.04, rel=1e-10)
