"""How much the targets constrain each fitted parameter, from the log-space Jacobian."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...targets.units import METRES, Unit

__all__ = ["MATCHED_RANGE_CAP", "add_confidence_ranges", "identifiability"]

# The largest log half-width a matched range reports: beyond it the targets do not bound the
# parameter at all (exp(50): a factor of 5e21).
MATCHED_RANGE_CAP = 50.0


def identifiability(
    jacobian_log: np.ndarray,
    names: list[str],
    values: dict[str, float],
    residual_scale: float | np.ndarray = 1.0,
    threshold: float = 1e-4,
    collinear_cos: float = 0.999,
    tolerance_norm: float | None = None,
    unit: Unit = METRES,
) -> list[dict[str, Any]]:
    """How much the target constrains each free parameter, to first order.

    ``jacobian_log`` is ``dr/dlog p`` (M, len(names)), e.g. ``OptimizeResult.jacobian``
    with ``OptimizeResult.free_names``. ``residual_scale`` (scalar or (M,)) converts a
    residual entry to the target's ``unit``, metres for position residuals (``1/sqrt(w)``
    for residuals ``sqrt(w) * (x - t)``). Doubling parameter k changes the residuals by
    about ``J[:, k] * ln 2``; its RMS and max over entries are reported, and a parameter
    whose max change is below ``threshold`` (default 0.1 mm) gets a warning. Pairs of
    columns with ``|cos| > collinear_cos`` are flagged (on the first of the pair).

    With ``tolerance_norm`` (the residual norm at which the targets stop counting as
    matched: sqrt(matched points) times the tolerance), each parameter also gets
    ``matched_range``: the factors (low, high) by which it can move, the others following
    where they make up for it, before the residual norm reaches it, to first order (the
    marginal extent of the tolerance ellipsoid in log space). It is reported, not warned
    about: on Blender-made cloth scenes the tolerance (up to 1 mm) leaves most dampings
    unbounded and stiffnesses 10-60 % either side, though a fit usually lands far closer.

    Returns one dict per parameter: ``name``, ``value``, ``rms_change``, ``max_change``,
    ``determined`` (bool), ``collinear_with`` (list of names), ``warnings`` (list of str),
    and ``matched_range`` with ``tolerance_norm``.
    """
    jac = np.asarray(jacobian_log, dtype=np.float64)
    if jac.ndim != 2 or jac.shape[1] != len(names):
        raise ValueError(f"jacobian must have shape (M, {len(names)}), got {jac.shape}")
    scale = np.broadcast_to(np.asarray(residual_scale, dtype=np.float64), (jac.shape[0],))
    change = jac * scale[:, None] * math.log(2.0)
    n_rows = max(jac.shape[0], 1)
    below = unit.format_threshold(threshold)
    entries: list[dict[str, Any]] = []
    for k, name in enumerate(names):
        col = change[:, k]
        rms = float(np.sqrt(np.sum(col * col) / n_rows))
        mx = float(np.max(np.abs(col), initial=0.0))
        determined = mx >= threshold
        warns = []
        if not determined:
            warns.append(
                f"{name}: x2 changes the target frames by < {below}; the target does not determine it"
            )
        entries.append(
            {
                "name": name,
                "value": float(values[name]) if name in values else float("nan"),
                "rms_change": rms,
                "max_change": mx,
                "determined": determined,
                "collinear_with": [],
                "warnings": warns,
            }
        )
    norms = np.linalg.norm(jac, axis=0)
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            if not (entries[a]["determined"] and entries[b]["determined"]) or norms[a] * norms[b] == 0.0:
                continue
            cos = float(jac[:, a] @ jac[:, b]) / (norms[a] * norms[b])
            if abs(cos) > collinear_cos:
                entries[a]["collinear_with"].append(names[b])
                entries[b]["collinear_with"].append(names[a])
                entries[a]["warnings"].append(
                    f"{names[a]} and {names[b]} have the same effect on the target; "
                    "only their combination is determined"
                )
    if tolerance_norm is not None and len(names):
        _matched_ranges(jac, entries, tolerance_norm)
    return entries


def _log_variances(jac: np.ndarray) -> np.ndarray:
    """Diagonal of (J^T J)^-1 through its eigenvectors: a direction the targets do not see (an
    eigenvalue of ~0) leaves every parameter it involves unbounded (inf), where a
    pseudo-inverse would call them exact."""
    eigenvalues, vectors = np.linalg.eigh(jac.T @ jac)
    seen = eigenvalues > 1e-12 * max(float(eigenvalues.max(initial=0.0)), 1e-300)
    out = np.empty(jac.shape[1])
    for k in range(jac.shape[1]):
        weights = vectors[k] ** 2
        if np.any(~seen & (weights > 1e-12)):
            out[k] = math.inf
        else:
            out[k] = float(np.sum(weights[seen] / eigenvalues[seen]))
    return out


def add_confidence_ranges(
    jacobian_log: np.ndarray,
    entries: list[dict[str, Any]],
    residual_norm: float,
    spread_limit: float,
    systematic: np.ndarray | None = None,
) -> None:
    """For targets with measurement noise (tracked markers: the residual left at the optimum
    is that noise): each entry of :func:`identifiability` gets ``confidence_range``, the
    factors (low, high) of its 95 % confidence interval (``2 sigma`` with the covariance
    ``s^2 (J^T J)^-1`` in log space, ``s^2`` the residual variance per entry); a parameter
    whose interval reaches past ``1 +- spread_limit`` is not determined (the noise leaves it
    that uncertain) and says so.

    ``systematic`` (modes, M): residual changes of errors that do not average out (a camera
    off by its solve's error moves every marker of a frame together), each one standard
    deviation; the shift of the optimum each causes, ``-(J^T J)^-1 J^T dr`` to first order,
    joins the interval in quadrature."""
    jac = np.asarray(jacobian_log, dtype=np.float64)
    dof = max(jac.shape[0] - jac.shape[1], 1)
    sigma = residual_norm / math.sqrt(dof)
    shifts = np.zeros(jac.shape[1])
    if systematic is not None and len(systematic):
        moved = np.linalg.lstsq(jac, np.asarray(systematic, dtype=np.float64).T, rcond=None)[0]
        shifts = np.sqrt(np.sum(moved**2, axis=1))
    what = "the noise of the targets" + (" and the camera's error" if systematic is not None else "")
    for entry, variance, shift in zip(entries, _log_variances(jac), shifts, strict=True):
        half = min(2.0 * math.sqrt(sigma**2 * variance + shift**2), MATCHED_RANGE_CAP)
        entry["confidence_range"] = [math.exp(-half), math.exp(half)]
        if half > math.log1p(spread_limit) and entry["determined"]:
            entry["determined"] = False
            spread = "unbounded" if half >= MATCHED_RANGE_CAP else f"{100 * math.expm1(half):.3g} %"
            entry["warnings"].append(
                f"{entry['name']}: {what} leave it uncertain by {spread} (95 % confidence, above "
                f"{100 * spread_limit:g} %); the targets do not determine it"
            )


def _matched_ranges(jac: np.ndarray, entries: list[dict[str, Any]], tolerance_norm: float) -> None:
    for entry, variance in zip(entries, _log_variances(jac), strict=True):
        half = float(tolerance_norm * math.sqrt(variance))
        if not math.isfinite(half) or half > MATCHED_RANGE_CAP:
            half = MATCHED_RANGE_CAP
        entry["matched_range"] = [math.exp(-half), math.exp(half)]
