"""The drape coefficient's search: the one setting (bending or shear) at which the drape rig
reads a lab's coefficient, run by the fabric fit (``lab_fit``) round after round.

The reading rises with the setting but is not smooth in it: the rig's mean of lifted starts
(``DrapeRig.lifts_m``) moves by about a hundredth between nearby settings, each start by up
to 0.04, as the folds change. So the search takes secant steps in log(setting) until it
has readings on both sides of the number, then interpolates between the nearest of them,
and stops within :data:`DRAPE_AIM` rather than chasing that noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DRAPE_AIM", "DRAPE_READ_BACK", "DrapeSearch", "drape_search"]

# the fit's tolerance on the drape coefficient (absolute), and where its search stops
DRAPE_READ_BACK = 0.01
DRAPE_AIM = DRAPE_READ_BACK
# a setting that moves the reading by less than this over a doubling is spent
DRAPE_SLOPE_FLOOR = 0.005
DRAPE_MAX_RUNS = 8
DRAPE_STEP_LIMIT = math.log(8.0)  # no step past 8 times the setting: the law is not known far out

# one run: (setting, reading, settled, each start's reading)
Run = tuple[float, float, bool, tuple]


@dataclass(frozen=True)
class DrapeSearch:
    """How a search ended: made by :func:`drape_search`, read by the fabric fit.
    ``outcome``: "matched" (within :data:`DRAPE_AIM`, or the best within
    :data:`DRAPE_READ_BACK`), "unsettled" (so, but that run had not come to rest),
    "unreachable" (the setting stops moving the reading, or a bound is reached short of it)
    or "stalled" (the runs ran out)."""

    outcome: str
    runs: int  # new runs this search made (earlier runs reused are not counted)
    best: Run  # the run nearest the number, settled ones first


def drape_search(
    target: float,
    read: Callable[[float], tuple[float, bool, tuple]],
    start: float,
    bounds: tuple[float, float],
    history: list[Run],
    max_runs: int = DRAPE_MAX_RUNS,
    before_run: Callable[[int], None] = lambda run: None,
) -> DrapeSearch:
    """The setting within ``bounds`` (both > 0) at which ``read(setting)`` -> (reading,
    settled, starts) gives ``target``, from ``start``. ``history`` holds earlier runs at the
    same other settings (an earlier round's): they count towards brackets and are not run
    again; the new runs are appended to it. ``before_run(n)`` is called before the n-th new
    run from the second on (a run takes seconds to minutes: the fit's progress and Esc)."""
    floor, high = bounds
    value = min(max(start, floor), high)
    runs, outcome = 0, "stalled"
    for _ in range(2 * max_runs):
        done = [h for h in history if h[0] == value]
        if done:  # run before: the latest again
            history.remove(done[0])
            history.append(done[0])
        elif runs == max_runs:
            break
        else:
            if runs:
                before_run(runs + 1)
            history.append((value, *read(value)))
            runs += 1
        reading, settled = history[-1][1:3]
        if abs(reading - target) <= DRAPE_AIM:
            outcome = "matched" if settled else "unsettled"
            break
        below = [h for h in history if h[1] < target]
        above = [h for h in history if h[1] > target]
        if below and above:
            # bracketed: interpolate between the nearest readings on either side, in
            # log(setting); the readings' noise can bend a secant through two close points
            # far out, not this
            (vb, rb, *_), (va, ra, *_) = max(below, key=lambda h: h[1]), min(above, key=lambda h: h[1])
            proposal = vb * (va / vb) ** ((target - rb) / (ra - rb))
            if any(abs(math.log(proposal / h[0])) < 1e-3 for h in history):
                break  # tried already: the noise decides within this bracket
            value = proposal
            continue
        if len(history) < 2:
            # the first step: stiffer drapes read higher, try 2x or 1/2 and measure the slope
            step = math.log(2.0) * (1.0 if target > reading else -1.0)
        else:
            (v0, r0, *_), (v1, r1, *_) = history[-2], history[-1]
            slope = (r1 - r0) / math.log(v1 / v0) if v1 != v0 else 0.0
            span = abs(math.log(v1 / v0))
            if abs(slope) * math.log(2.0) < DRAPE_SLOPE_FLOOR and span >= 0.5 * math.log(2.0):
                outcome = "unreachable"  # the setting no longer moves the drape
                break
            step = (target - r1) / slope if slope > 0.0 else math.log(2.0) * (1.0 if target > r1 else -1.0)
            step = max(-DRAPE_STEP_LIMIT, min(DRAPE_STEP_LIMIT, step))
        clamped = min(max(value * math.exp(step), floor), high)
        if clamped == value:
            outcome = "unreachable"  # at a bound and still short
            break
        value = clamped
    best = min(history, key=lambda h: abs(h[1] - target) + (not h[2]) * 10.0)
    if outcome == "stalled" and abs(best[1] - target) <= DRAPE_READ_BACK:
        outcome = "matched" if best[2] else "unsettled"
    return DrapeSearch(outcome, runs, best)
