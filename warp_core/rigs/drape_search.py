"""The drape coefficient's search: the one setting (bending or shear) at which the drape rig
reads a lab's coefficient, run by the fabric fit (``lab_fit``) round after round.

The reading rises with the setting, in a step over two to four decades (flat where the
specimen lies stiff or the setting no longer counts, flat again where it hangs limp), but
is not smooth in it: the rig's mean of lifted starts (``DrapeRig.lifts_m``) moves by about
a hundredth between nearby settings, each start by up to 0.04, as the folds change. So the
search steps in log(setting), by secants where the readings slope and a decade where they
do not (from a start at one bound, to the other bound), until it has readings on both sides
of the number, then interpolates between the nearest of them, and stops within
:data:`DRAPE_AIM` rather than chasing that noise.

It can read ``width`` settings at a time (``drape.run_drapes`` runs them as one batch on a
GPU), spread along the step it would take or across the bracket it has. The fabric fit reads
one (``lab_fit.DRAPE_WIDTH``): on the H200 four settings in a batch took 2.2x one's time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["DRAPE_AIM", "DRAPE_READ_BACK", "DrapeSearch", "drape_search"]

# the fit's tolerance on the drape coefficient (absolute), and where its search stops
DRAPE_READ_BACK = 0.01
DRAPE_AIM = DRAPE_READ_BACK
# a setting that moves the reading by less than this over a doubling is spent
DRAPE_SLOPE_FLOOR = 0.005
# most reads of one search (each of ``width`` settings)
DRAPE_MAX_RUNS = 8
# the longest step past the last setting (log): a secant from a flat stretch reaches far
DRAPE_STEP_LIMIT = math.log(1000.0)
# a step where no slope is known yet: a decade
DRAPE_STEP = math.log(10.0)
# settings read together beside a bracket's interpolation: readings this far either side
DRAPE_SPREAD = 0.03
# a proposal within this (log) of a setting read already is not read again
TRIED = 1e-3
# settings read together across a wide bracket lie this share of its (log) span apart
WIDE = 0.1
# a bracket narrower than this (log) is closed: the readings' noise decides within it
NARROW = math.log(1.02)

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
    runs: int  # new settings this search read (earlier runs reused are not counted)
    best: Run  # the run nearest the number, settled ones first


def drape_search(
    target: float,
    read: Callable[[list[float]], Sequence[tuple[float, bool, tuple]]],
    start: float,
    bounds: tuple[float, float],
    history: list[Run],
    width: int = 1,
    before_run: Callable[[int], None] = lambda run: None,
    prior: Sequence[Run] = (),
) -> DrapeSearch:
    """The setting within ``bounds`` (both > 0) at which the rig reads ``target``, from
    ``start``: ``read(settings)`` gives each setting's (reading, settled, starts), up to
    ``width`` at a time. ``history`` holds earlier runs at the same other settings (an
    earlier round's): they count towards brackets and are not run again; the new runs are
    appended to it. ``prior``: runs at other settings near these (a round before the last
    rig moved them a little), which shape the first read only. At most :data:`DRAPE_MAX_RUNS` reads;
    ``before_run(n)`` is called before the n-th read from the second on (a read takes
    seconds to minutes: the fit's progress and Esc)."""
    if width < 1:
        raise ValueError(f"the search reads at least one setting at a time, got width {width}")
    floor, high = bounds
    value = min(max(start, floor), high)
    runs = reads = 0
    outcome = "stalled"
    while True:
        if history:
            best = _best(history, target)
            if abs(best[1] - target) <= DRAPE_AIM:
                outcome = "matched" if best[2] else "unsettled"
                break
        if reads == DRAPE_MAX_RUNS:
            break
        if history:
            proposals = _proposals(target, history, bounds, width, _slope(_nearest(prior, target)))
        elif prior:
            proposals = _proposals(target, list(prior), bounds, width, fresh=True)
        else:
            proposals = _first(value, bounds, width)
        if proposals is None:
            outcome = "unreachable"
            break
        if not proposals:
            break  # tried already: the noise decides within this bracket
        if reads:
            before_run(reads + 1)
        history.extend((v, *reading) for v, reading in zip(proposals, read(proposals), strict=True))
        runs += len(proposals)
        reads += 1
    best = _best(history, target)
    if outcome == "stalled" and abs(best[1] - target) <= DRAPE_READ_BACK:
        outcome = "matched" if best[2] else "unsettled"
    return DrapeSearch(outcome, runs, best)


def _best(history: list[Run], target: float) -> Run:
    return min(history, key=lambda h: abs(h[1] - target) + (not h[2]) * 10.0)


def _first(value: float, bounds: tuple[float, float], width: int) -> list[float]:
    """The first read: the start, and decades from it on either side, within the bounds,
    nearest first."""
    floor, high = bounds
    offsets = sorted(range(-width, width + 1), key=lambda k: (abs(k), k))
    settings = [value * math.exp(k * DRAPE_STEP) for k in offsets]
    return sorted([s for s in settings if floor <= s <= high][:width])


def _proposals(
    target: float,
    history: list[Run],
    bounds: tuple[float, float],
    width: int,
    slope_hint: float | None = None,
    fresh: bool = False,
) -> list[float] | None:
    """The next ``width`` settings to read (fewer where some were read already, none where
    every one was), or None where the number is out of the setting's reach. ``slope_hint``:
    the reading's slope over log(setting) where ``history`` has one setting only (a prior
    round's). ``fresh``: ``history`` is a prior's (the law moved a little since), to be read
    again around its answer."""
    floor, high = bounds
    below = [h for h in history if h[1] < target]
    above = [h for h in history if h[1] > target]
    if fresh:
        centre = _interpolated(target, below, above) if below and above else _best(history, target)[0]
        slope = _slope(_nearest(history, target))
        step = math.log(1.5) if slope is None or slope <= 0.0 else DRAPE_SPREAD / 1.5 / slope
        step = min(max(step, math.log(1.05)), math.log(2.0))
        settings = [centre * math.exp(step * (j - (width - 1) / 2)) for j in range(width)]
        return sorted({min(max(s, floor), high) for s in settings})
    if below and above:
        # bracketed: interpolate between the nearest readings on either side, in
        # log(setting); the readings' noise can bend a secant through two close points
        # far out, not this
        (vb, rb, *_), (va, ra, *_) = max(below, key=_rank), min(above, key=_rank)
        span = math.log(va / vb)
        at = (target - rb) / (ra - rb)
        if abs(span) < NARROW:
            return []  # the noise decides within this bracket
        if abs(span) > math.log(4.0):
            # a wide bracket holds the step's bend, which an interpolation alone leaves one
            # end of for many reads: keep off the ends, and read beside it
            centre = min(max(at, 0.15), 0.85)
            fractions = [min(max(centre + WIDE * (j - (width - 1) / 2), 0.05), 0.95) for j in range(width)]
        else:
            offsets = [DRAPE_SPREAD * (2 * j - (width - 1)) / max(width - 1, 1) for j in range(width)]
            fractions = [min(max((target + o - rb) / (ra - rb), 0.02), 0.98) for o in offsets]
        settings = [vb * math.exp(f * span) for f in fractions]
    else:
        rising = target > max(h[1] for h in history)
        ordered = sorted(history, key=lambda h: h[0], reverse=not rising)
        v, r = ordered[-1][:2]
        if v == (high if rising else floor):
            return None  # at a bound and still short
        if len(history) == 1 and slope_hint is None and v == (floor if rising else high):
            # the start sits at one bound with the number beyond it (the shear's search
            # starts at its top): the other bound brackets the number or shows it out of
            # reach in one read, where decades walk the whole range
            return [high if rising else floor]
        step = DRAPE_STEP
        frontier = ordered[-3:]
        slope = _slope(frontier) if len(frontier) > 1 else slope_hint
        if slope is not None:
            # flat over the last settings, far enough apart for the noise not to hide a slope:
            # spent (one flat stretch can be the step's near end, which the search starts on)
            if len(frontier) == 3 and abs(math.log(frontier[-1][0] / frontier[0][0])) >= math.log(4.0):
                if abs(slope) * math.log(2.0) < DRAPE_SLOPE_FLOOR:
                    return None
            if slope * math.log(2.0) >= DRAPE_SLOPE_FLOOR:
                # no shorter than the noise allows (one setting), or than four spread over it
                shortest = math.log(1.2) if width == 1 else math.log(1.5)
                step = min(max(abs(target - r) / slope, shortest), DRAPE_STEP_LIMIT)
        share = max((width + 1) // 2, 1)
        sign = 1.0 if rising else -1.0
        settings = [v * math.exp(sign * step * (j + 1) / share) for j in range(width)]
        settings = [min(max(s, floor), high) for s in settings]
    unique: list[float] = []
    for s in settings:
        if all(abs(math.log(s / t)) >= TRIED for t in [h[0] for h in history] + unique):
            unique.append(s)
    return sorted(unique)


def _rank(run: Run) -> tuple[float, float]:
    """A bracket's ends are the readings nearest the number on either side, and of equal
    readings the settings nearest the other side (the reading rises with the setting)."""
    return run[1], run[0]


def _interpolated(target: float, below: list[Run], above: list[Run]) -> float:
    (vb, rb, *_), (va, ra, *_) = max(below, key=_rank), min(above, key=_rank)
    return vb * (va / vb) ** ((target - rb) / (ra - rb))


def _nearest(runs: Sequence[Run], target: float) -> list[Run]:
    """The two runs that read nearest the number: further ones reach into the step's flat
    ends."""
    return sorted(runs, key=lambda h: abs(h[1] - target))[:2]


def _slope(runs: list[Run]) -> float | None:
    """The least-squares slope of reading over log(setting) through ``runs`` (None where
    they do not span two settings)."""
    if len(runs) < 2:
        return None
    logs = [math.log(h[0]) for h in runs]
    mean_log, mean_reading = sum(logs) / len(logs), sum(h[1] for h in runs) / len(runs)
    spread = sum((x - mean_log) ** 2 for x in logs)
    if spread < TRIED**2:
        return None
    return sum((x - mean_log) * (h[1] - mean_reading) for x, h in zip(logs, runs, strict=True)) / spread
