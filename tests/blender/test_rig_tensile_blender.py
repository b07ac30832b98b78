"""The strip tensile rigs (``warp_core.rigs.tensile``) run by Blender's own cloth and by this
project's model: the same strip, settings and window rule, one elongation read.

The default rigs: a straight strip 5 x 20 quads of 10 mm and a bias strip 5 x 20 diamonds
(the grid turned 45 deg), hung by their own weight standing for KES's EMT load (490.3 N/m),
air damping 1, quality 5; Blender in its float32, this model in float64. Measured
(elongation, frames to settle):

=========================  ====================  ====================  =======
settings (T = C, S)        Blender               this model            apart
=========================  ====================  ====================  =======
straight 0.05, 0.05        6.4929 %, 60 fr       6.4929 %, 60 fr       0.00 %
straight 0.163, 0.05       2.4914 %, 60 fr       2.4913 %, 60 fr       0.00 %
straight 0.5, 0.05         0.9105 %, 60 fr       0.9105 %, 60 fr       0.00 %
straight 16.3, 5 (stiff)   0.0251 %, 40 fr       0.0251 %, 40 fr       0.01 %
bias 0.163, 0.03           7.6218 %, 60 fr       7.6217 %, 60 fr       0.00 %
bias 0.163, 0.1            2.3994 %, 60 fr       2.3993 %, 60 fr       0.00 %
bias 0.163, 0.3            0.8211 %, 60 fr       0.8211 %, 60 fr       0.00 %
bias 15, 0.0135            15.0457 %, 60 fr      15.0426 %, 60 fr      0.02 %
=========================  ====================  ====================  =======

Under a lab load the strip hangs far heavier than the solver's errors (the bottom row moves
by under a micrometre a frame once settled), so, unlike the cantilever, both solvers read
the same to four digits, and both read the static equilibrium of the strip's springs.
Blender runs a strip in 0.06-0.35 s, this model in 0.1-0.6 s.
"""

from __future__ import annotations

import numpy as np
import pytest
from blender_ref import ClothParams, export_from_blender, reset_scene
from strip_rigs import PIN_GROUP, StripRig, run_blender_strip, strip_object, tensile

ACCEPTANCE = 0.05  # the elongation Blender reads off the fitted values, relative


def fabric(tension: float, shear: float) -> ClothParams:
    return ClothParams(tension_stiffness=tension, compression_stiffness=tension, shear_stiffness=shear)


@pytest.mark.parametrize("bias", [False, True])
def test_blender_runs_the_rigs_strip_and_settings(bias: bool) -> None:
    """The object Blender simulates is the rig's: its vertices, the clamped ones in the "Pin"
    group, and the rig's settings (its vertex mass, the load) read back by the add-on's own
    export."""
    rig = StripRig(bias=bias)
    settings = fabric(0.163, 0.05)
    ob = strip_object(settings, rig)
    mesh, params = export_from_blender(ob)
    strip, _ = tensile.strip_mesh(rig)
    assert ob.vertex_groups[0].name == PIN_GROUP
    np.testing.assert_allclose(mesh.vertices, strip.vertices, atol=1e-7)
    np.testing.assert_array_equal(mesh.pin_weights, strip.pin_weights)
    expected = tensile.strip_settings(settings, rig)
    for name in ("mass", "tension_stiffness", "compression_stiffness", "shear_stiffness", "air_damping"):
        assert getattr(params, name) == pytest.approx(getattr(expected, name), rel=1e-6), name
    assert params.gravity == pytest.approx(expected.gravity)


@pytest.mark.parametrize(
    ("bias", "tension", "shear"),
    [(False, 0.05, 0.05), (False, 0.163, 0.05), (False, 0.5, 0.05), (True, 0.163, 0.03), (True, 0.163, 0.3)],
)
def test_blender_and_this_model_read_the_same_elongation(bias: bool, tension: float, shear: float) -> None:
    """Measured 0.001-0.002 % apart (the table above); held to 1 %, a fifth of the acceptance."""
    rig = StripRig(bias=bias)
    blender = run_blender_strip(fabric(tension, shear), rig)
    ours = tensile.run_strip(fabric(tension, shear), rig)
    assert blender.settled and ours.settled, (blender, ours)
    assert blender.frames <= rig.frame_limit // 4  # measured 60
    assert blender.elongation == pytest.approx(ours.elongation, rel=0.01), (blender, ours)


def test_blenders_own_reading_moves_by_a_micrometre_less_than_the_acceptance() -> None:
    """The noise floor under the comparison: the rig lifted 1 micrometre (the same problem,
    rounded differently in Blender's float32) reads 15.0018 % instead of 15.0015 % on the bias
    strip at shear 0.013544, tension 15 (lifted -1 and 2 micrometres: 15.0013, 15.0017 %); the
    straight strip at tension 0.0235 reads 7.9887-7.9888 % lifted or not. Held to 0.5 %."""
    settings = fabric(15.0, 0.013544)
    rig = StripRig(bias=True)
    base = run_blender_strip(settings, rig)
    reset_scene()  # the first strip would be stepped along with the second
    lifted = run_blender_strip(settings, rig, shift_m=1e-6)
    assert base.settled and lifted.settled
    assert lifted.elongation == pytest.approx(base.elongation, rel=0.005)


@pytest.mark.parametrize("emt", [3.0, 8.0])
def test_blender_reads_the_elongation_the_tension_fit_asked_for(emt: float) -> None:
    """EMT 3 % and 8 % on 10 mm quads (shear 0.02): the fit finds tension 0.14809 and 0.04766
    (3 runs each); Blender's own cloth reads 3.0000 % and 7.9958 % off them (-0.00 and -0.05 %
    of the request; at Blender's default shear 5 the fit finds 0.0721 and 0.0235, read 2.9998
    and 7.9887 %)."""
    fit = tensile.fit_tension(emt, ClothParams(shear_stiffness=0.02))
    assert fit.outcome == "matched", fit.outcome
    reading = run_blender_strip(fit.settings, fit.rig)
    assert reading.settled
    assert reading.elongation_percent == pytest.approx(emt, rel=ACCEPTANCE)


@pytest.mark.parametrize("bias_percent", [10.0, 25.0])
def test_blender_reads_the_bias_elongation_the_shear_fit_asked_for(bias_percent: float) -> None:
    """Bias elongations 10 % and 25 % at tension 0.15: the fit finds shear 0.02256 and
    0.0078863 (3 runs each); Blender reads 10.0000 % and 24.9214 % (-0.00 and -0.31 % of the
    request; at Blender's default tension 15 the fit finds 0.0209 and 0.0070, read 9.9992
    and 24.9864 %)."""
    fit = tensile.fit_shear(bias_percent, fabric(0.15, 5.0))
    assert fit.outcome == "matched", fit.outcome
    reading = run_blender_strip(fit.settings, fit.rig)
    assert reading.settled
    assert reading.elongation_percent == pytest.approx(bias_percent, rel=ACCEPTANCE)
