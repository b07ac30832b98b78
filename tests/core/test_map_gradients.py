"""The tape gradient of a cloth rollout's loss with respect to the per-vertex weights of the
stiffness and shrink vertex groups (``blender_cloth/maps.py``), against central differences
of the whole rollout's loss (float64, CG iteration counts held, as the tape differentiates
them), on three small curved or pinned sheets with non-uniform maps; the public entries
(``FitObjective.map_gradient``, ``warp_core.fit.maps.map_gradient``) and their refusals.

Measured (``pytest -s`` prints it), 20 random directions per scene over all of its maps
together: the exact tape's directional derivative within 5.3e-8 (hanging), 3.0e-6 (linear)
and 5.7e-8 (clamped) of the difference's, relative; the 33 per-vertex spot checks within
6.0e-6 where the slope exceeds 1e-5 (one slope of 3.7e-7 is off by 2.4e-10, the loss's
rounding over the step). The stable gradient: sign right for 60 of 60 directions, within 2x
for 60 of 60; its guard took the implicit reverse on some substeps of the linear sheet
(ratios 0.71 to 1.16 there, 1.000 on the other two).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest
import warp as wp
from tape_check import curved_sheet, squared_distance_loss, vec3d

from warp_core import ClothMesh, ClothParams, grid_mesh
from warp_core.fit import FitError, FitObjective, FitProblem, FitSettings, Target
from warp_core.fit.maps import map_gradient
from warp_core.models import get_model
from warp_core.models.blender_cloth.maps import MAP_FIELDS
from warp_core.models.blender_cloth.simulator import ClothSimulator

EPS = 1e-6  # central-difference step in weight units
DIRECTIONS = 20
EXACT_REL = 1e-4


def _smooth(x: np.ndarray, y: np.ndarray, phase: float) -> np.ndarray:
    """A smooth, non-uniform weight in [0.1, 0.9]."""
    return 0.5 + 0.4 * np.sin(3.0 * x + 2.0 * y + phase)


def hanging_sheet() -> tuple[ClothMesh, ClothParams, tuple[str, ...]]:
    """ANGULAR: a curved 5 x 5 sheet hanging from its top row, every map painted, shrinking
    on, the compression maximum below the compression (the other side of Blender's fabsf)."""
    mesh = grid_mesh(5, 5, 1.0, 1.0)
    x, y = mesh.vertices[:, 0], mesh.vertices[:, 1]
    mesh.vertices[:, 2] = 0.3 * y**2 + 0.05 * np.sin(3 * x)
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    for k, field in enumerate(MAP_FIELDS.values()):
        setattr(mesh, field, _smooth(x, y, 1.3 * k))
    params = ClothParams(
        tension_stiffness_max=40.0,
        compression_stiffness_max=5.0,
        shear_stiffness_max=20.0,
        bending_stiffness=2.0,
        bending_stiffness_max=8.0,
        shrink_min=0.05,
        shrink_max=0.15,
    )
    return mesh, params, tuple(MAP_FIELDS)


def linear_sheet() -> tuple[ClothMesh, ClothParams, tuple[str, ...]]:
    """LINEAR: the 6 x 6 curved sheet of quads and triangles, two corners pinned and the
    rest of the top row on goal springs, every map painted, the shrink group growing some
    springs (factors 0.96 to 1.02). The stable reverse's guard takes the implicit reverse on
    some of its substeps. Quality 10: at 5 its truncated CG amplifies rounding to 1e-11 of
    the loss (measured; 3e-15 at 10), and a difference over 1e-6 of a weight means little."""
    vertices, polygons = curved_sheet(0.4)
    y = vertices[:, 1]
    top = y >= y.max() - 1e-9
    pins = np.where(top, 0.9, 0.0)
    pins[np.flatnonzero(top)[[0, -1]]] = 1.0
    mesh = ClothMesh.from_polygons(vertices, polygons, pin_weights=pins)
    x = vertices[:, 0]
    for k, field in enumerate(MAP_FIELDS.values()):
        setattr(mesh, field, _smooth(x, y, 0.7 + 1.1 * k))
    params = ClothParams(
        bending_model="LINEAR",
        tension_stiffness=20.0,
        tension_stiffness_max=60.0,
        shear_stiffness_max=15.0,
        bending_stiffness=0.5,
        bending_stiffness_max=3.0,
        pin_stiffness=5.0,
        quality=10,
        shrink_min=-0.02,
        shrink_max=0.04,
    )
    return mesh, params, tuple(MAP_FIELDS)


def clamped_sheet() -> tuple[ClothMesh, ClothParams, tuple[str, ...]]:
    """ANGULAR: a flat 6 x 4 sheet clamped along both short edges, sagging between them (where
    bending shows); the stiffness maps only, no shrink group."""
    mesh = grid_mesh(6, 4, 1.0, 0.6)
    x, y = mesh.vertices[:, 0], mesh.vertices[:, 1]
    mesh.pin_weights = (np.abs(x) >= x.max() - 1e-9).astype(float)
    kinds = ("structural", "shear", "bending")
    for k, kind in enumerate(kinds):
        setattr(mesh, MAP_FIELDS[kind], _smooth(x, y, 2.1 * k + 0.4))
    params = ClothParams(
        tension_stiffness=10.0,
        tension_stiffness_max=30.0,
        compression_stiffness_max=25.0,
        shear_stiffness_max=2.0,
        bending_stiffness=1.0,
        bending_stiffness_max=20.0,
    )
    return mesh, params, kinds


SCENES = {"hanging": hanging_sheet, "linear": linear_sheet, "clamped": clamped_sheet}


@dataclass
class MapCase:
    """A scene's mesh and settings, the maps whose gradient is checked, and a target made by
    the same scene with other weights (plus 1 cm of noise)."""

    mesh: ClothMesh
    params: ClothParams
    kinds: tuple[str, ...]
    frame_end: int = 10
    frames: tuple[int, ...] = (4, 7, 10)
    target: np.ndarray | None = None

    @classmethod
    def of(cls, scene: str) -> MapCase:
        mesh, params, kinds = SCENES[scene]()
        case = cls(mesh, params, kinds)
        rng = np.random.default_rng(7)
        n = mesh.vertex_count
        other = {k: np.clip(case.weights(k) + 0.2 * rng.standard_normal(n), 0.0, 1.0) for k in kinds}
        x = case.rollout(other, None)
        case.target = x + 0.01 * rng.standard_normal(x.shape)
        return case

    def weights(self, kind: str) -> np.ndarray:
        return getattr(self.mesh, MAP_FIELDS[kind])

    def rollout(self, maps: dict[str, np.ndarray], iterations: np.ndarray | None) -> np.ndarray:
        """Positions at the frames of a simulator built with ``maps`` painted on the mesh."""
        mesh = dataclasses.replace(self.mesh, **{MAP_FIELDS[k]: w for k, w in maps.items()})
        sim = ClothSimulator(mesh, self.params, precision="float64")
        return sim.rollout(self.frame_end, list(self.frames), frozen=iterations, keep_states=False).numpy()

    def loss(self, maps: dict[str, np.ndarray], iterations: np.ndarray) -> float:
        return float(((self.rollout(maps, iterations) - self.target) ** 2).sum())

    def tape(self, gradient: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The tape's map gradients of ``gradient`` kind, and the CG counts of the rollout."""
        sim = ClothSimulator(self.mesh, self.params, precision="float64")
        sim.gradient = gradient
        sim.record_maps(self.kinds)
        loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            rollout = sim.rollout(self.frame_end, list(self.frames))
            wp.launch(
                squared_distance_loss,
                dim=(len(self.frames), sim.vertex_count),
                inputs=[rollout.positions, wp.array(self.target, dtype=vec3d)],
                outputs=[loss],
            )
        tape.backward(loss)
        return sim.map_gradients(), rollout.cg_iterations

    def directional(self, direction: dict[str, np.ndarray], iterations: np.ndarray) -> float:
        """Central difference of the loss along ``direction`` (kind -> (N,))."""
        plus = {k: self.weights(k) + EPS * d for k, d in direction.items()}
        minus = {k: self.weights(k) - EPS * d for k, d in direction.items()}
        return (self.loss(plus, iterations) - self.loss(minus, iterations)) / (2 * EPS)


def random_directions(case: MapCase, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    n = case.mesh.vertex_count
    return [{k: rng.standard_normal(n) for k in case.kinds} for _ in range(DIRECTIONS)]


def along(grads: dict[str, np.ndarray], direction: dict[str, np.ndarray]) -> float:
    return float(sum(grads[k] @ d for k, d in direction.items()))


@pytest.fixture(scope="module")
def measured() -> dict:
    """Per scene: the central differences along its directions, the exact and stable tapes'
    directional derivatives, and the spot checks (computed once for the tests below)."""
    out = {}
    for seed, scene in enumerate(SCENES):
        case = MapCase.of(scene)
        exact, iterations = case.tape("exact")
        stable, stable_iterations = case.tape("stable")
        assert np.array_equal(iterations, stable_iterations)
        directions = random_directions(case, seed)
        fd = np.array([case.directional(d, iterations) for d in directions])
        n = case.mesh.vertex_count
        spots = []
        for v in (n // 2, n - 1, 1):  # inside, a pinned corner, on the free edge
            for kind in case.kinds:
                unit = np.zeros(n)
                unit[v] = 1.0
                spots.append((kind, v, float(exact[kind][v]), case.directional({kind: unit}, iterations)))
        out[scene] = {
            "fd": fd,
            "exact": np.array([along(exact, d) for d in directions]),
            "stable": np.array([along(stable, d) for d in directions]),
            "spots": spots,
        }
    return out


@pytest.mark.parametrize("scene", list(SCENES))
def test_exact_tape_matches_central_differences(measured: dict, scene: str) -> None:
    m = measured[scene]
    fd, tape = m["fd"], m["exact"]
    assert np.all(fd != 0.0)
    rel = np.abs(tape - fd) / np.abs(fd)
    print(f"\n{scene}: exact tape vs central differences, {len(fd)} directions: worst {rel.max():.2e}")
    assert rel.max() < EXACT_REL, (scene, rel)
    worst = 0.0
    for kind, v, grad, diff in m["spots"]:
        # 1e-9: the loss's rounding (2e-15) over the step, where a vertex's slope is tiny
        assert abs(grad - diff) <= EXACT_REL * abs(diff) + 1e-9, (scene, kind, v, grad, diff)
        if abs(diff) > 1e-5:
            worst = max(worst, abs(grad - diff) / abs(diff))
    tiny = sum(abs(diff) <= 1e-5 for *_, diff in m["spots"])
    print(f"{scene}: {len(m['spots'])} per-vertex spot checks: worst {worst:.2e} ({tiny} below 1e-5)")


def test_stable_gradient_agrees_in_sign_and_size(measured: dict) -> None:
    """As the parameters' stable gradient is judged: sign right for >= 95 %, within 2x for >= 80 %."""
    fd = np.concatenate([m["fd"] for m in measured.values()])
    tape = np.concatenate([m["stable"] for m in measured.values()])
    ratio = tape / fd
    sign = np.mean(ratio > 0.0)
    within = np.mean((ratio >= 0.5) & (ratio <= 2.0))
    for scene, m in measured.items():
        r = m["stable"] / m["fd"]
        print(f"\n{scene}: stable/fd ratio {r.min():.3f} to {r.max():.3f}")
    print(f"stable gradient, {len(fd)} directions: sign {sign:.0%}, within 2x {within:.0%}")
    assert sign >= 0.95 and within >= 0.80, (sign, within, ratio)


def test_maps_leave_the_parameter_gradient_as_it_was() -> None:
    """Recording maps adds work to the backward pass, not a change to the parameters' numbers."""
    mesh, params, _ = hanging_sheet()
    rest = mesh.vertices
    problem = FitProblem(
        mesh, params, [Target(4, rest + [0.0, 0.0, -0.05])], ["tension_stiffness", "bending_stiffness"]
    )
    for gradient in ("exact", "stable"):
        settings = FitSettings(gradient=gradient)
        values = params.values()
        objective = FitObjective(problem, settings, problem.free_parameters)
        before = objective.gradient(values)
        loss, maps = objective.map_gradient(values, ["structural", "bending"])
        after = objective.gradient(values)
        assert before == after and loss == before[0], gradient
        again = map_gradient(problem, settings, values, ["structural", "bending"])
        for kind in ("structural", "bending"):
            np.testing.assert_array_equal(again[kind], maps[kind])
            assert np.abs(maps[kind]).max() > 0.0


def test_painted_maps_run_as_a_mesh_built_with_them() -> None:
    mesh, params, kinds = clamped_sheet()
    rng = np.random.default_rng(3)
    maps = {k: rng.uniform(0.0, 1.0, mesh.vertex_count) for k in kinds}
    sim = ClothSimulator(mesh, params, precision="float64")
    sim.rollout(6)
    sim.set_maps(maps)
    built = ClothSimulator(
        dataclasses.replace(mesh, **{MAP_FIELDS[k]: w for k, w in maps.items()}), params, precision="float64"
    )
    np.testing.assert_array_equal(sim.rollout(6).numpy(), built.rollout(6).numpy())
    np.testing.assert_array_equal(sim.topology.hinge_ang_stiffness, built.topology.hinge_ang_stiffness)
    # the mesh given stays as it was
    assert mesh.structural_stiffness_weight is not sim.mesh.structural_stiffness_weight


def test_what_is_refused() -> None:
    mesh, params, _ = hanging_sheet()
    sim = ClothSimulator(mesh, params, precision="float64")
    with pytest.raises(ValueError, match="rest lengths"):
        sim.set_maps({"shrink": np.zeros(mesh.vertex_count)})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        sim.set_maps({"shear": np.full(mesh.vertex_count, 1.5)})
    with pytest.raises(ValueError, match="unknown weight map"):
        sim.record_maps(["pressure"])
    with pytest.raises(ValueError, match="no backward pass"):
        sim.record_maps(["shear"])
        sim.map_gradients()
    dynamic = ClothSimulator(mesh, params.replace(use_dynamic_mesh=True), precision="float64")
    with pytest.raises(ValueError, match="dynamic mesh"):
        dynamic.record_maps(["shrink"])
    assert get_model("soft_body").map_kinds == ("stiffness", "damping")  # its own (test_soft_body_maps)
    problem = FitProblem(mesh, params, [Target(4, mesh.vertices)], ["tension_stiffness"])
    objective = FitObjective(problem, FitSettings(), ["tension_stiffness"])
    with pytest.raises(FitError, match="map"):
        objective.map_gradient(params.values(), ["internal"])
