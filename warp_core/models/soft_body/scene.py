"""The Newton scene of a soft body: its lattice as one tetrahedral soft mesh, the ground
plane and the colliders, the solver and (where there is anything to touch) the collision
pipeline.

Contacts are Newton's particle-shape contacts: lattice nodes against the ground plane and
collider meshes, a penalty of stiffness ``CONTACT_STIFFNESS_CELLS * E * h`` (ten times the
stiffness of one cubic cell of the material, following E whenever it is set: a simulator
built at other start values then moves exactly as one built at these), so a body
resting on the ground sinks into it by a small fraction of a cell; undamped, as
``set_contact_stiffness`` says why. Newton mixes the particle side's and the shape's contact
materials (stiffness by their mean, friction by the geometric mean): the particle side's
stiffness is 0 and the shapes' twice the contact's, and the shape's friction is squared
against a particle-side friction of 1.

Damping: Newton's tetrahedral ``k_damp`` is a viscosity (Pa s) on the rate of the right
Cauchy-Green tensor C = F^T F; its viscous stress is ``4 k_damp`` times the strain rate,
the shear stress of the material ``2 mu`` times the strain. The model's ``damping`` is the
time ``tau`` (s) of stiffness-proportional damping instead (viscous shear stress = ``tau``
times the rate of the elastic one), so ``k_damp = tau * mu / 2``: what a damping value
does then does not change with the stiffness being fitted.
"""

from __future__ import annotations

from dataclasses import dataclass

import newton
import numpy as np
import warp as wp

from .lattice import Lattice
from .motion import collider_poses
from .params import SoftBodyParams, viscosity
from .soft_mesh import add_soft_body, colour

__all__ = [
    "CONTACT_STIFFNESS_CELLS",
    "NewtonScene",
    "build_scene",
    "newton_damping",
    "newton_determinism",
    "set_density",
    "set_material",
]

CONTACT_STIFFNESS_CELLS = 10.0
# particle radius and contact detection band, in cells: nodes touch a surface with their
# centre, and contacts are found a quarter cell ahead of it (detection runs every substep;
# a wider band only adds idle contacts to every iteration)
PARTICLE_RADIUS_CELLS = 1e-3
CONTACT_GAP_CELLS = 0.25


@dataclass
class NewtonScene:
    """Everything Newton holds for one soft body."""

    model: newton.Model
    solver: newton.solvers.SolverVBD
    states: tuple[newton.State, newton.State]
    pipeline: newton.CollisionPipeline | None
    contacts: newton.Contacts | None
    unit_mass: np.ndarray  # (M,) node masses per unit density (pinned nodes included)
    moving: list[np.ndarray]  # the (F, 4, 4) world matrices of each moving collider, by body
    moving_names: list[str]
    origin: np.ndarray  # (3,) world position of the simulation's origin
    contact_stiffness: float = 0.0  # N/m, every contact's penalty stiffness (``set_contact_stiffness``)

    def body_poses(self, n_frames: int) -> np.ndarray | None:
        """(n_frames + 1, B, 7) poses of the moving colliders' bodies, None without any."""
        if not self.moving:
            return None
        poses = [
            collider_poses(m, name, n_frames, self.origin)
            for m, name in zip(self.moving, self.moving_names, strict=True)
        ]
        return np.stack(poses, axis=1)


def newton_damping(params: SoftBodyParams) -> float:
    """Newton's ``k_damp`` (Pa s) for the damping time ``params.damping`` (s)."""
    return viscosity(float(params.damping), params.lame()[0])


def newton_determinism(device: wp.Device | str) -> wp.DeterministicMode:
    """Newton's determinism mode for a solver on ``device``: run-to-run on CUDA, where
    atomics add in whatever order the threads reach them; none asked for on the CPU, where
    Warp runs a kernel's threads one after another, so its atomics add in one order anyway.

    The run-to-run mode costs a pass on the CPU too: each process regenerates every kernel
    of Newton's VBD module, adjoints included, to find its atomics (2.3-2.6 s on this
    project's 2-core CPU, on every first rollout of a process; 0.6 ms without). Measured on
    the CPU, rollouts are the same bit for bit in both modes: a cube dropped on a rising
    collider, six robustness scenes (dropped and hanging boxes and spheres) and a sphere
    sliding at friction 0.8 (``test_soft_body_determinism``)."""
    return (
        wp.DeterministicMode.RUN_TO_RUN
        if wp.get_device(device).is_cuda
        else wp.DeterministicMode.NOT_GUARANTEED
    )


def _shape_config(friction: float) -> newton.ModelBuilder.ShapeConfig:
    # the stiffness and damping: set_contact_stiffness's, once the model is built
    cfg = newton.ModelBuilder.ShapeConfig()
    cfg.mu = float(friction) ** 2  # against the particles' 1: geometric mean = friction
    cfg.density = 0.0  # colliders are kinematic: no mass or inertia to compute
    cfg.margin = 0.0
    cfg.has_shape_collision = False  # colliders never touch each other, only the body
    return cfg


def _add_colliders(builder: newton.ModelBuilder, params: SoftBodyParams, origin: np.ndarray) -> tuple:
    moving, names = [], []
    for k, c in enumerate(params.colliders):
        world = c.vertices @ c.matrices[0][:3, :3].T + c.matrices[0][:3, 3] - origin
        mesh = newton.Mesh(world.astype(np.float32), c.triangles.ravel(), compute_inertia=False)
        cfg = _shape_config(c.friction)
        body = -1
        if c.moves:
            collider_poses(c.matrices, c.name, len(c.matrices) - 1)  # refuse a non-rigid motion now
            body = builder.add_body(xform=wp.transform_identity(), is_kinematic=True, label=f"collider {k}")
            moving.append(c.matrices)
            names.append(c.name)
        builder.add_shape_mesh(body, mesh=mesh, cfg=cfg, label=f"collider {k}: {c.name}")
    return moving, names


def build_scene(
    lattice: Lattice, params: SoftBodyParams, pinned: np.ndarray, device: str, origin: np.ndarray
) -> NewtonScene:
    """Build the Newton model and solver; ``pinned`` (M,) bool marks the kinematic nodes.
    Everything is placed relative to ``origin`` (world)."""
    mu, lam = params.lame()
    h = lattice.cell_size
    stiffness = contact_stiffness(float(params.young_modulus), h)
    builder = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=tuple(float(g) for g in params.gravity))
    # Newton's add_soft_mesh, batched; without its bending edges, which serve self-contact only
    tets = add_soft_body(
        builder,
        (lattice.nodes - origin).astype(np.float32),
        lattice.tets,
        density=1.0,
        k_mu=mu,
        k_lambda=lam,
        k_damp=newton_damping(params),
        particle_radius=PARTICLE_RADIUS_CELLS * h,
    )
    if params.ground:
        builder.add_ground_plane(
            height=float(params.ground_height - origin[2]), cfg=_shape_config(params.friction)
        )
    moving, names = _add_colliders(builder, params, origin)
    colour(builder, tets)
    model = builder.finalize(device=device)
    model.soft_contact_mu = 1.0

    unit_mass = model.particle_mass.numpy().astype(np.float64)
    pipeline = contacts = None
    if model.shape_count:
        pipeline = newton.CollisionPipeline(model, soft_contact_gap=CONTACT_GAP_CELLS * h, deterministic=True)
        contacts = pipeline.contacts()
    solver = newton.solvers.SolverVBD(
        model,
        iterations=int(params.iterations),
        # colliders move by their animation, set on the states by the caller
        integrate_with_external_rigid_solver=True,
        deterministic=newton_determinism(device),
    )
    states = (model.state(), model.state())
    scene = NewtonScene(model, solver, states, pipeline, contacts, unit_mass, moving, names, origin)
    set_contact_stiffness(scene, stiffness)
    set_density(scene, float(params.density), pinned)
    return scene


def set_density(scene: NewtonScene, density: float, pinned: np.ndarray) -> None:
    """Node masses for ``density``; pinned nodes stay kinematic (mass and inverse mass 0)."""
    mass = scene.unit_mass * density
    mass[pinned] = 0.0
    inv = np.divide(1.0, mass, out=np.zeros_like(mass), where=mass > 0.0)
    scene.model.particle_mass.assign(mass.astype(np.float32))
    scene.model.particle_inv_mass.assign(inv.astype(np.float32))


def contact_stiffness(young_modulus: float, cell_size: float) -> float:
    """The penalty stiffness (N/m) of a body of ``young_modulus`` (Pa; with painted maps,
    the tets' mean) in a lattice of ``cell_size`` (m)."""
    return CONTACT_STIFFNESS_CELLS * float(young_modulus) * float(cell_size)


def set_contact_stiffness(scene: NewtonScene, stiffness: float) -> None:
    """The penalty stiffness of every contact, in place, and no contact damping.

    Newton's contact damping acts only while a node approaches the surface: a kink in the
    force where it turns, at which VBD's iterations stall. With it (a time of 1 ms times the
    stiffness) a 20 cm cube dropped on the ground ended its substeps 0.17 of their forces
    from their roots at 50 and at 200 iterations, so the adjoint differentiated steps VBD
    never reached and the tangents were refused; without it, 5.6e-5 at 10 iterations and
    2e-5 at 50. The implicit step damps a node's bounce on its own: the same cube at three
    stiffnesses moved within 0.1 mm of the damped contact's motion, at rest alike.

    Newton takes a contact's stiffness as the mean of the particle side's and the shape's.
    The particle side's is a launch argument, which a captured graph keeps as it was; the
    shapes' are arrays, which it reads when replayed. So the particle side stays 0 and each
    shape carries twice the value: the mean is the value exactly (doubling and halving are
    exact in float32), and a change of stiffness (it follows Young's modulus) keeps every
    graph, where a new launch argument would make each rollout of a fit capture its graphs
    anew."""
    model = scene.model
    model.soft_contact_ke = 0.0
    model.soft_contact_kd = 0.0
    if model.shape_count:
        model.shape_material_ke.fill_(2.0 * stiffness)
        model.shape_material_kd.fill_(0.0)
    scene.contact_stiffness = stiffness


def set_material(scene: NewtonScene, materials: np.ndarray) -> None:
    """Every tet's (k_mu, k_lambda, k_damp) ((T, 3), ``materials.tet_materials``), in place."""
    scene.model.tet_materials.assign(np.asarray(materials, dtype=np.float32))
