"""The cantilever rig (``warp_core.rigs.cantilever``) in Blender's cloth model: Peirce's
elastica read at two tip angles, the statics' dependence on bending / mass alone, and the
settle check.

A 25 mm strip of 5 mm quads, 20 mm pinned on the platform, a 150 g/m^2 fabric's vertex mass
(3.75 mg) with the rig's default mass scale (1000), air damping 10 and quality 10, float64.
Every number below was measured with these settings; each run takes 1-4 s on the CPU once
the kernels are compiled.
"""

from __future__ import annotations

import math

import pytest

from warp_core.models.blender_cloth.params import ClothParams
from warp_core.rigs import CantileverRig, cantilever_strip, run_cantilever

VERTEX_MASS = 3.75e-6  # kg: 150 g/m^2 over a 5 mm x 5 mm quad
BENDING = 0.028  # hangs a 45 mm overhang at about 41 deg


def fabric(bending: float = BENDING, mass: float = VERTEX_MASS) -> ClothParams:
    return ClothParams(mass=mass, bending_stiffness=bending, bending_stiffness_max=bending, quality=10)


def test_the_strip_lies_on_the_platform_with_its_part_there_pinned() -> None:
    rig = CantileverRig()
    mesh, grid = cantilever_strip(rig)
    assert grid.shape == (6, 14)  # 25 mm across, 20 + 45 mm along, 5 mm edges
    x = mesh.vertices[:, 0]
    assert x.min() == pytest.approx(-0.02) and x.max() == pytest.approx(0.045)
    assert (mesh.pin_weights == (x <= 1e-12)).all()
    assert mesh.polygon_count == 5 * 13
    with pytest.raises(ValueError, match="whole number"):
        cantilever_strip(CantileverRig(overhang_m=0.0475))


def test_the_bending_length_read_at_two_tip_angles_follows_peirce() -> None:
    """Overhangs of 45 and 35 mm hang at 40.7 and 25.8 deg and read bending lengths of 23.16
    and 22.13 mm: 4.5 % apart, inside the 5 % the acceptance asks, but not by much.

    Peirce's formula is itself an approximation: on the exact inextensible elastica (solved
    by shooting) it reads 1.8 % long at 40.7 deg and 0.8 % at 25.8 deg, so a perfect
    continuous strip would show 1.0 % here. Most of the rest is the mesh: a chain of 9 and 7
    rigid 5 mm links whose hinges resist with Blender's moment (bending * 0.1 * edge times
    the angle, on a lever of half an edge) under equal vertex masses (a whole column's weight
    on the tip's half-cell) spreads 3.7 % between these angles (23.51 and 24.38 mm); the
    reading grows with the angle by about 0.25 % a degree (22.66 mm at 33 deg, 23.68 at 47,
    24.56 at 58). So the 5 % is no slack: a further 1 % error in the model's statics that
    widens the spread fails this test (one that narrows it passes; a 2 % one passes only
    leaning that way). Each reading is the mean over a 50-frame window; successive windows
    of a long run read within +-0.6 %."""
    near = run_cantilever(fabric(), CantileverRig(overhang_m=0.045))
    low = run_cantilever(fabric(), CantileverRig(overhang_m=0.035))
    assert near.settled and low.settled
    assert 38.0 < near.tip_angle_deg < 43.0
    assert 20.0 < low.tip_angle_deg < 30.0
    agreement = low.bending_length_m / near.bending_length_m - 1.0
    assert abs(agreement) < 0.05, (near, low)
    # Peirce's c ~ O / 2 at the standards' angle
    assert near.bending_length_m == pytest.approx(0.5 * near.overhang_m, rel=0.05)


def test_mass_and_bending_scaled_together_hang_the_same() -> None:
    """Four times the mass and the bending: 40.23 instead of 40.69 deg, bending length
    23.30 instead of 23.16 mm (0.6 %), within the +-0.6 % that successive windows of one run
    read apart. Statics that saw mass apart from bending / mass would hang the heavier
    strip lower, reading a bending length smaller by up to 4^(1/3) = 1.59 times."""
    base = run_cantilever(fabric())
    heavy = run_cantilever(fabric(4.0 * BENDING, 4.0 * VERTEX_MASS))
    assert base.settled and heavy.settled
    assert heavy.bending_length_m == pytest.approx(base.bending_length_m, rel=0.02)
    assert heavy.tip_angle_deg == pytest.approx(base.tip_angle_deg, abs=1.5)


def test_the_bending_length_grows_as_the_cube_root_of_bending_over_mass() -> None:
    """Bending / mass 3.375 times smaller on an overhang 1.5 times shorter (30 instead of
    45 mm) hangs at nearly the same angle (41.88 against 40.69 deg) with a bending length
    of 15.21 against 23.16 mm: c ~ (bending / mass)^0.346, measured at equal angles because
    the reading drifts with the angle (see the Peirce test). The 0.013 over 1/3 is the
    coarser strip's (6 edges against 9) and the two windows' noise (+-0.6 % each,
    +-0.01 in the exponent); 1/4 or 1/2 would miss the 0.03 allowed by far."""
    stiff = run_cantilever(fabric(), CantileverRig(overhang_m=0.045))
    soft = run_cantilever(fabric(BENDING / 3.375), CantileverRig(overhang_m=0.03))
    assert stiff.settled and soft.settled
    assert soft.tip_angle_deg == pytest.approx(stiff.tip_angle_deg, abs=3.0)
    exponent = math.log(stiff.bending_length_m / soft.bending_length_m) / math.log(3.375)
    assert exponent == pytest.approx(1.0 / 3.0, abs=0.03)


def test_a_fabric_at_its_real_vertex_mass_does_not_hang() -> None:
    """Why the rig scales the mass: unscaled (3.75 mg a vertex, air damping 1) the strip's
    weight is below the solver's noise; after 400 frames its tip is 3.4 deg below the
    platform (the scaled strip's is 40.7) and still wandering."""
    reading = run_cantilever(fabric(), CantileverRig(mass_scale=1.0, air_damping=1.0, frame_limit=400))
    assert not reading.settled
    assert reading.tip_angle_deg < 10.0


def test_a_run_stopped_before_the_strip_settles_says_so() -> None:
    """After 100 frames (at air damping 10 the strip creeps down) the tip is at 31.0 deg and
    its 50-frame mean moves 0.26 mm a frame, 65 times the settle tolerance; the same strip
    settles at frame 350, at 40.7 deg, its mean moving 1.1 micrometres a frame."""
    rig = CantileverRig(frame_limit=100)
    reading = run_cantilever(fabric(), rig)
    assert not reading.settled
    assert reading.frames == 100
    assert reading.tip_drift_m > 5 * rig.settle_m_per_frame
    settled = run_cantilever(fabric())
    assert settled.settled and rig.frame_limit < settled.frames < CantileverRig().frame_limit
    # the stopped strip has not yet fallen as far
    assert reading.tip_angle_deg < settled.tip_angle_deg - 2.0
