"""The cantilever rig (``warp_core.rigs.cantilever``) run by Blender's own cloth and by this
project's model: the same strip, settings and window rule, one bending length read.

The default rig: a 25 mm strip of 5 mm quads, 20 mm pinned on the platform, a 45 mm
overhang, a 150 g/m^2 fabric's vertex mass (3.75 mg) times the rig's mass scale (1000), air
damping 10, quality 10; Blender in its float32, this model in float64. Measured (tip angle,
bending length, frames to settle):

=========  =============================  =============================  ==========
bending    Blender                        this model                     apart
=========  =============================  =============================  ==========
0.028      40.27 deg, 23.285 mm, 300 fr   40.69 deg, 23.158 mm, 350 fr   +0.55 %
0.054      26.80 deg, 27.995 mm, 250 fr   26.74 deg, 28.017 mm, 350 fr   -0.08 %
=========  =============================  =============================  ==========

Most of that is Blender's own noise: the solver never rests (the strip trembles 0.2-0.7 mm
a frame, see the rig's docstring), and lifting the whole rig by 1 or 2 micrometres (the
same problem, rounded differently) moves Blender's reading to 40.33-40.58 deg, 23.19-23.29
mm at bending 0.028 (0.4 % spread) and to 26.52-27.12 deg, 27.86-28.11 mm at 0.054 (0.9 %),
settling at 200-350 frames. Over the six runs Blender and this model stay within 0.6 %,
against the acceptance's 5 %. Blender runs each strip in about 1 s, this model in about 2 s.
"""

from __future__ import annotations

import numpy as np
import pytest
from blender_ref import ClothParams, export_from_blender, reset_scene
from fabric_rigs import PIN_GROUP, CantileverRig, cantilever_object, rigs, run_blender_cantilever

VERTEX_MASS = 3.75e-6  # kg: 150 g/m^2 over a 5 mm x 5 mm quad
ACCEPTANCE = 0.05  # the bending length Blender reads off the fitted values, relative


def fabric(bending: float) -> ClothParams:
    return ClothParams(mass=VERTEX_MASS, bending_stiffness=bending, bending_stiffness_max=bending, quality=10)


def test_blender_runs_the_rigs_strip_and_settings() -> None:
    """The object Blender simulates is the rig's: its vertices, the platform part in the "Pin"
    group, and the scaled settings read back by the add-on's own export."""
    rig = CantileverRig()
    settings = fabric(0.028)
    ob, grid = cantilever_object(settings, rig)
    mesh, params = export_from_blender(ob)
    strip, _ = rigs.cantilever_strip(rig)
    assert ob.vertex_groups[0].name == PIN_GROUP
    np.testing.assert_allclose(mesh.vertices, strip.vertices, atol=1e-7)
    np.testing.assert_array_equal(mesh.pin_weights, strip.pin_weights)
    assert grid.shape == (6, 14)
    expected = rigs.rig_settings(settings, rig)
    for name in ("mass", "bending_stiffness", "bending_stiffness_max", "air_damping", "tension_stiffness"):
        assert getattr(params, name) == pytest.approx(getattr(expected, name), rel=1e-6), name
    assert params.quality == expected.quality == 10
    assert params.gravity == pytest.approx(expected.gravity)
    assert params.mass == pytest.approx(1000.0 * VERTEX_MASS)


@pytest.mark.parametrize("bending", [0.028, 0.054])
def test_blender_and_this_model_read_the_same_bending_length(bending: float) -> None:
    """Measured 0.55 % apart at bending 0.028 (about 40 deg) and 0.08 % at 0.054 (about
    27 deg). The acceptance's 5 % is asserted on the bending length; the tip angles, measured
    0.42 and 0.06 deg apart (Blender's own 1-micrometre spread: 0.3 and 0.6 deg), are held
    to 1.5 deg, about 2 % of bending length at these angles."""
    rig = CantileverRig()
    blender = run_blender_cantilever(fabric(bending), rig)
    ours = rigs.run_cantilever(fabric(bending), rig)
    assert blender.settled and ours.settled, (blender, ours)
    assert blender.frames <= rig.frame_limit // 2  # measured 300 and 250: well before the limit
    assert blender.bending_length_m == pytest.approx(ours.bending_length_m, rel=ACCEPTANCE), (blender, ours)
    assert blender.tip_angle_deg == pytest.approx(ours.tip_angle_deg, abs=1.5), (blender, ours)


def test_blenders_own_reading_moves_by_a_micrometre_less_than_the_acceptance() -> None:
    """The noise floor under the comparison: the rig lifted 1 micrometre (the same problem,
    rounded differently in Blender's float32) reads bending length 23.193 instead of
    23.285 mm at bending 0.028 (0.4 %), and 28.111 against 27.995 mm at 0.054. A spread
    near 5 % would leave no room to tell a model's error from Blender's own; held to 2 %."""
    rig = CantileverRig()
    base = run_blender_cantilever(fabric(0.028), rig)
    reset_scene()  # the first strip would be stepped along with the second
    lifted = run_blender_cantilever(fabric(0.028), rig, shift_m=1e-6)
    assert base.settled and lifted.settled
    assert lifted.bending_length_m == pytest.approx(base.bending_length_m, rel=0.02)
    # not bit for bit the same run: the micrometre does reach the solver's rounding
    assert lifted.tip_angle_rad != base.tip_angle_rad


@pytest.mark.parametrize(("weight_gsm", "length_mm", "edge_mm"), [(150.0, 25.0, 5.0), (100.0, 15.0, 5.0)])
def test_blender_reads_the_bending_length_a_fabric_fit_asked_for(
    weight_gsm: float, length_mm: float, edge_mm: float
) -> None:
    """A shirting (150 g/m^2, 25 mm) and a lighter fabric (100 g/m^2, 15 mm) on 5 mm quads:
    the bending the fabric fit finds at their vertex mass, set in Blender's own cloth on the
    same rig built in bpy, reads the lab's bending length. Measured: -0.30 % and +0.64 %
    (also 300 g/m^2 40 mm on 10 mm quads -1.0 %, 60 g/m^2 10 mm +0.5 %; 400 g/m^2 50 mm on
    10 mm quads does not settle, and the fit says so)."""
    fit = rigs.fit_bending(rigs.FabricNumbers(weight_gsm, length_mm), edge_mm * 1e-3)
    assert fit.outcome == "matched", fit.outcome
    reading = run_blender_cantilever(fit.settings, fit.rig)
    assert reading.settled
    assert reading.bending_length_m * 1e3 == pytest.approx(length_mm, rel=0.02)
