"""Matched ranges checked at their ends (``verdict.matched_check``) on residuals whose
matched sets are known exactly: a linear one, where the check may only take off what the
fit's own residual uses of the tolerance, and curved ones, where the first-order range is
too short or too long and the check moves it to where the targets stop matching."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warp_core.fit.verdict.identifiability import identifiability
from warp_core.fit.verdict.matched_check import MAX_STRETCH, check_matched_ranges, extremal_steps

TOLERANCE_NORM = 0.1
WIDE = (np.full(2, -50.0), np.full(2, 50.0))


def entries_for(jac: np.ndarray) -> list[dict]:
    return identifiability(
        jac, ["a", "b"], {"a": 1.0, "b": 1.0}, tolerance_norm=TOLERANCE_NORM, threshold=0.0
    )


def norms_of(residual):
    return lambda points: [float(np.linalg.norm(residual(z))) for z in points]


def crossing(residual, direction: np.ndarray, limit: float) -> float:
    """Where |residual(t * direction)| first reaches ``limit`` (bisection on t >= 0)."""
    lo, hi = 0.0, 1.0
    while np.linalg.norm(residual(hi * direction)) < limit:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.linalg.norm(residual(mid * direction)) < limit else (lo, mid)
    return lo


def test_the_extremal_step_puts_each_parameter_at_the_ellipsoids_end() -> None:
    jac = np.array([[2.0, 1.0], [0.5, 3.0], [1.0, -1.0]])
    steps = extremal_steps(jac)
    inverse = np.linalg.inv(jac.T @ jac)
    for k in range(2):
        assert np.linalg.norm(jac @ steps[:, k]) == pytest.approx(1.0)
        assert steps[k, k] == pytest.approx(math.sqrt(inverse[k, k]))
    assert extremal_steps(np.array([[1.0, 2.0], [2.0, 4.0]])) is None  # one direction unseen


def test_a_linear_residual_ends_where_the_norm_reaches_the_tolerance() -> None:
    jac = np.array([[2.0, 1.0], [0.5, 3.0], [1.0, -1.0]])
    offset = np.array([0.01, -0.02, 0.03])  # the fit's own residual, orthogonal to what J moves
    offset -= jac @ np.linalg.lstsq(jac, offset, rcond=None)[0]

    def residual(z):
        return jac @ z + offset

    entries = entries_for(jac)
    first = [list(e["matched_range"]) for e in entries]
    fitted = float(np.linalg.norm(offset))
    simulated = check_matched_ranges(
        entries, jac, np.zeros(2), TOLERANCE_NORM, fitted, norms_of(residual), WIDE
    )
    assert simulated == 4
    steps = extremal_steps(jac) * TOLERANCE_NORM
    for k, entry in enumerate(entries):
        assert entry["matched_range_checked"]
        low, high = entry["matched_range"]
        assert low > first[k][0] and high < first[k][1]  # the residual already there takes some
        for sign, factor in ((-1.0, low), (1.0, high)):
            t = math.log(factor) / (sign * steps[k, k])
            assert np.linalg.norm(residual(t * sign * steps[:, k])) == pytest.approx(TOLERANCE_NORM, rel=1e-9)


@pytest.mark.parametrize("misjudged", [2.0, 0.5], ids=["range_too_short", "range_too_long"])
def test_each_end_moves_to_where_a_misjudged_slope_really_stops_matching(misjudged: float) -> None:
    """The fit's Jacobian says the residual moves ``misjudged`` times as fast as it does (as a
    difference over a kink can): the first-order range is off by that factor, and the check
    lands on the true crossing on each side."""
    true_jac = np.array([[1.0, 0.3], [0.2, 0.5], [0.4, -0.2]])

    def residual(z):
        return true_jac @ z

    jac = misjudged * true_jac
    entries = entries_for(jac)
    first = [list(e["matched_range"]) for e in entries]
    check_matched_ranges(entries, jac, np.zeros(2), TOLERANCE_NORM, 0.0, norms_of(residual), WIDE)
    steps = extremal_steps(jac) * TOLERANCE_NORM
    for k, entry in enumerate(entries):
        for side, sign in ((0, -1.0), (1, 1.0)):
            true_t = crossing(residual, sign * steps[:, k], TOLERANCE_NORM)
            assert true_t == pytest.approx(misjudged, rel=1e-9)
            assert entry["matched_range"][side] == pytest.approx(first[k][side] ** misjudged, rel=1e-9)


def test_a_loss_that_grows_slower_than_its_square_keeps_each_end_inside_the_matched_set() -> None:
    """Along a the residual grows as sqrt: the first-order end (from the slope at a small
    distance) is far short, the check moves it out, and not past where the targets stop
    matching."""

    def residual(z):
        a, b = z
        return np.array([0.03 * math.copysign(math.sqrt(abs(a) / 0.01), a) if abs(a) > 0.01 else 3.0 * a, b])

    jac = np.array([[3.0, 0.0], [0.0, 1.0]])  # the slope near the fit
    entries = entries_for(jac)
    first = list(entries[0]["matched_range"])
    check_matched_ranges(entries, jac, np.zeros(2), TOLERANCE_NORM, 0.0, norms_of(residual), WIDE)
    low, high = entries[0]["matched_range"]
    assert math.log(high) > 1.5 * math.log(first[1]) and math.log(low) < 1.5 * math.log(first[0])
    for factor in (low, high):
        assert np.linalg.norm(residual(np.array([math.log(factor), 0.0]))) <= TOLERANCE_NORM
    assert math.log(high) < crossing(residual, np.array([1.0, 0.0]), TOLERANCE_NORM)


def test_a_line_on_which_the_loss_does_not_grow_stops_at_the_stretch_limit() -> None:
    jac = np.array([[1.0, 0.0], [0.0, 1.0]])
    entries = entries_for(jac)
    half = math.log(entries[0]["matched_range"][1])
    check_matched_ranges(
        entries, jac, np.zeros(2), TOLERANCE_NORM, 0.0, lambda points: [0.0] * len(points), WIDE
    )
    assert entries[0]["matched_range"][1] == pytest.approx(math.exp(MAX_STRETCH * half))


def test_a_bound_ends_the_line_and_an_unsimulated_end_keeps_its_first_order_value() -> None:
    jac = np.array([[1.0, 0.0], [0.0, 1.0]])
    entries = entries_for(jac)
    first = [list(e["matched_range"]) for e in entries]
    bounds = (np.array([-0.05, -50.0]), np.array([50.0, 50.0]))  # a's floor half-way to its end

    def norms_at(points):  # b's ends cannot be simulated; a's lower end matches at the floor
        return [None if abs(z[1]) > 1e-12 else 0.5 * TOLERANCE_NORM for z in points]

    check_matched_ranges(entries, jac, np.zeros(2), TOLERANCE_NORM, 0.0, norms_at, bounds)
    assert entries[0]["matched_range"][0] == first[0][0]  # matched to the floor: it reaches it
    assert entries[0]["matched_range"][1] > first[0][1]
    assert entries[1]["matched_range"] == first[1]
    assert "matched_range_checked" not in entries[1]
