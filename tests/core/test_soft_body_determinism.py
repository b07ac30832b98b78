"""Newton's determinism mode on the CPU (``scene.newton_determinism``): the soft body runs
without the run-to-run mode there, whose per-process pass over Newton's VBD kernels costs
seconds, and must move exactly as it does with it: the fit's finite differences and its
side-by-side rollouts rely on rollouts that repeat bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from soft_body_meshes import box_mesh, rising_plate, sphere_mesh, swinging_goals

from warp_core.models.soft_body import SoftBodyParams, SoftBodySimulator
from warp_core.models.soft_body import scene as soft_body_scene


def rising_cube() -> tuple:
    """A cube dropped onto a plate that rises under it (a moving mesh collider), then onto
    the ground, 30 frames."""
    cube, params = rising_plate()
    return cube, params, 30, None


def sliding_sphere() -> tuple:
    """A sphere dropped 15 cm onto the ground at friction 0.8, 40 frames."""
    sphere = sphere_mesh(0.15, 8, 12, centre=(0.0, 0.0, 0.3))
    return sphere, SoftBodyParams(lattice_cells=5, ground=True, friction=0.8), 40, None


def swung_block() -> tuple:
    """A block held by its top face and swung 5 cm by its pins' goals."""
    block = box_mesh((0.0, 0.0, -0.3), (0.1, 0.1, 0.0), (1, 1, 3), pin=lambda v: v[:, 2] > -1e-9)
    return (
        block,
        SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=3),
        20,
        swinging_goals(block, 20, 0.05, 4.0),
    )


SCENES = {"rising plate": rising_cube, "sliding sphere": sliding_sphere, "swung block": swung_block}


def test_the_cpu_asks_for_no_determinism_and_cuda_for_run_to_run() -> None:
    assert soft_body_scene.newton_determinism("cpu") == wp.DeterministicMode.NOT_GUARANTEED
    if wp.is_cuda_available():
        assert soft_body_scene.newton_determinism("cuda:0") == wp.DeterministicMode.RUN_TO_RUN


@pytest.mark.parametrize("name", list(SCENES))
def test_cpu_rollouts_are_the_run_to_run_modes_bit_for_bit(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mesh, params, frames, goals = SCENES[name]()
    sim = SoftBodySimulator(mesh, params)
    found = sim.rollout(1 + frames, goals=goals).numpy()
    again = sim.rollout(1 + frames, goals=goals).numpy()
    assert np.abs(found - found[0]).max() > 0.01  # it moves by more than a centimetre
    np.testing.assert_array_equal(again, found)
    monkeypatch.setattr(soft_body_scene, "newton_determinism", lambda device: wp.DeterministicMode.RUN_TO_RUN)
    run_to_run = SoftBodySimulator(mesh, params).rollout(1 + frames, goals=goals).numpy()
    np.testing.assert_array_equal(run_to_run, found)
