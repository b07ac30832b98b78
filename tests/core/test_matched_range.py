"""How far a fitted value can move while the targets still count as matched (first order):
the marginal extent of the tolerance ellipsoid in log space, against a hand computation;
reported in the identifiability entries, not warned about."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warp_core.fit.verdict.identifiability import MATCHED_RANGE_CAP, identifiability


def test_matched_range_is_the_tolerance_ellipsoid() -> None:
    # residuals r = J dz: parameter a alone moves 3 entries by 0.1 m per unit log, b moves
    # the same entries nearly as a does (correlated) plus one of its own by 0.01 m
    jac = np.array([[0.1, 0.1], [0.1, 0.1], [0.1, 0.1], [0.0, 0.01]])
    tolerance_norm = 1e-3
    entries = identifiability(jac, ["a", "b"], {"a": 1.0, "b": 1.0}, tolerance_norm=tolerance_norm)
    covariance = np.linalg.inv(jac.T @ jac)
    for k, entry in enumerate(entries):
        half = tolerance_norm * math.sqrt(covariance[k, k])
        assert entry["matched_range"] == pytest.approx([math.exp(-half), math.exp(half)])
    # only b's own entry tells them apart: each may move by +-10.5 % (computed); no warning
    assert entries[0]["matched_range"][1] == pytest.approx(1.10535, rel=1e-4)
    assert not any(e["warnings"] for e in entries)
    # a Jacobian column of zeros: unbounded, reported at the cap
    free = identifiability(np.array([[0.1, 0.0]]), ["a", "b"], {"a": 1.0, "b": 1.0}, tolerance_norm=1e-3)
    assert free[1]["matched_range"][1] == pytest.approx(math.exp(MATCHED_RANGE_CAP))
    # without a tolerance nothing of this is computed
    assert "matched_range" not in identifiability(jac, ["a", "b"], {"a": 1.0, "b": 1.0})[0]
