"""Warp kernels of the soft-body model around Newton's solver: the pinned (kinematic)
lattice nodes and moving colliders set before each substep, and the embedded mesh
vertices read out of the lattice, back in world space (the simulation runs relative to an
origin at the lattice's centre, see ``simulator``)."""

import warp as wp


@wp.kernel
def set_pinned_nodes(
    nodes: wp.array(dtype=wp.int32),
    goal_start: wp.array(dtype=wp.vec3),
    goal_end: wp.array(dtype=wp.vec3),
    alpha: float,
    fps: float,
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
):
    """Pinned node k at time ``alpha`` of the frame from goal_start to goal_end (linear)."""
    k = wp.tid()
    a = goal_start[k]
    b = goal_end[k]
    node = nodes[k]
    q[node] = a + alpha * (b - a)
    qd[node] = (b - a) * fps


@wp.kernel
def set_body_poses(
    pose_start: wp.array(dtype=wp.transform),
    pose_end: wp.array(dtype=wp.transform),
    alpha: float,
    body_q: wp.array(dtype=wp.transform),
):
    """Collider body b at time ``alpha`` of the frame: translation lerped, rotation slerped."""
    b = wp.tid()
    a = pose_start[b]
    e = pose_end[b]
    p = wp.lerp(wp.transform_get_translation(a), wp.transform_get_translation(e), alpha)
    r = wp.quat_slerp(wp.transform_get_rotation(a), wp.transform_get_rotation(e), alpha)
    body_q[b] = wp.transform(p, r)


@wp.kernel
def embed_vertices(
    vertex_nodes: wp.array2d(dtype=wp.int32),
    weights: wp.array2d(dtype=wp.float32),
    q: wp.array(dtype=wp.vec3),
    origin: wp.vec3,
    out: wp.array2d(dtype=wp.vec3),
    row: int,
):
    """Mesh vertex i in world space: its barycentric combination of four lattice nodes
    (simulated relative to ``origin``)."""
    i = wp.tid()
    x = weights[i, 0] * q[vertex_nodes[i, 0]]
    x += weights[i, 1] * q[vertex_nodes[i, 1]]
    x += weights[i, 2] * q[vertex_nodes[i, 2]]
    x += weights[i, 3] * q[vertex_nodes[i, 3]]
    out[row, i] = x + origin


@wp.kernel
def nodes_to_world(q: wp.array(dtype=wp.vec3), origin: wp.vec3, out: wp.array2d(dtype=wp.vec3), row: int):
    i = wp.tid()
    out[row, i] = q[i] + origin
