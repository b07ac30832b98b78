"""The drape coefficient's setting search (``warp_core.rigs.drape_search``) on readings whose
answer is known: a drape law of the rig's shape (rising from about 0.2 to 1 over three
decades of the setting, as the drape rig's bending does on 15 mm edges), with and without
the noise the rig's mean of starts shows (up to a hundredth), a law that levels off short of
the number, and runs a later round reuses."""

from __future__ import annotations

import math

import pytest

from warp_core.rigs.drape_search import DRAPE_AIM, DRAPE_MAX_RUNS, DRAPE_READ_BACK, drape_search

BOUNDS = (1e-6, 10000.0)


def law(setting: float) -> float:
    """0.2 at the limp end, 0.6 at 1e-3, then up to 1 (a smooth step in log(setting)), and
    above 0.01 on by 0.02 a factor e, as the stiff specimen stretches a little further."""
    step = 0.2 + 0.8 / (1.0 + math.exp(-1.2 * math.log(setting / 1e-3)))
    return step + 0.02 * max(0.0, math.log(setting / 0.01))


def noisy(setting: float) -> float:
    """The law with a fixed wobble of up to +-0.009 that changes sign every few percent of
    the setting, largest where the folds form (mid-way) and gone where the specimen lies
    flat or hangs limp, as the rig's starts spread."""
    folding = min(1.0, 4.0 * (law(setting) - 0.2) * (1.0 - (law(setting) - 0.2) / 0.8) / 0.8)
    return law(setting) + 0.009 * folding * math.sin(57.0 * math.log(setting))


def reader(function, calls: list[float], settled: bool = True, reads: list[int] | None = None):
    def read(settings: list[float]) -> list[tuple[float, bool, tuple]]:
        calls.extend(settings)
        if reads is not None:
            reads.append(len(settings))
        return [(v, settled, (v - 0.01, v + 0.01)) for v in map(function, settings)]

    return read


@pytest.mark.parametrize("function", [law, noisy], ids=["smooth", "noisy"])
@pytest.mark.parametrize("target", [0.3, 0.5, 0.9])
def test_the_search_reaches_the_number_from_the_default_bending(function, target: float) -> None:
    calls: list[float] = []
    history: list = []
    search = drape_search(target, reader(function, calls), 0.5, BOUNDS, history)
    assert search.outcome == "matched", (search, history)
    value, reading, settled, starts = search.best
    assert abs(reading - target) <= DRAPE_AIM
    assert reading == function(value) and settled and starts == (reading - 0.01, reading + 0.01)
    assert search.runs == len(calls) == len(history) <= DRAPE_MAX_RUNS
    # the answer is where the law reads the number, within what the noise allows
    exact = 1e-3 * math.exp(-math.log(0.8 / (target - 0.2) - 1.0) / 1.2)
    slope = 1.2 * (target - 0.2) * (1.0 - (target - 0.2) / 0.8)  # d reading / d log(setting)
    assert abs(math.log(value / exact)) <= (DRAPE_AIM + 0.01) / slope


def test_a_later_round_reuses_the_runs_it_has() -> None:
    """The same search again from its answer, the other settings unchanged: no new run."""
    calls: list[float] = []
    history: list = []
    first = drape_search(0.5, reader(noisy, calls), 0.5, BOUNDS, history)
    again = drape_search(0.5, reader(noisy, calls), first.best[0], BOUNDS, history)
    assert (again.outcome, again.runs, again.best) == ("matched", 0, first.best)
    assert len(calls) == first.runs


def test_a_number_the_setting_cannot_reach_is_unreachable_with_the_nearest_reading() -> None:
    """A stiff fabric's drape that no softer setting brings below about 0.96 (canvas-like
    numbers on 10 mm edges), and a number above what the stiffest setting reads."""

    def levels_off(setting: float) -> float:
        return 0.96 + 0.03 * law(setting)

    calls: list[float] = []
    search = drape_search(0.85, reader(levels_off, calls), 0.5, BOUNDS, [])
    assert search.outcome == "unreachable", search
    assert search.best[1] == min(levels_off(v) for v in calls)
    search = drape_search(1.2, reader(law, []), 0.5, (1e-6, 2.0), [])
    assert search.outcome == "unreachable" and search.best[0] == 2.0


def test_runs_that_do_not_settle_are_called_so_and_the_runs_are_bounded() -> None:
    search = drape_search(0.5, reader(law, [], settled=False), 0.5, BOUNDS, [])
    assert search.outcome == "unsettled" and abs(search.best[1] - 0.5) <= DRAPE_READ_BACK

    # a law that jumps over the number (a fold more or less) is bracketed to within 5 % and
    # left stalled, within the reads allowed, the nearest reading kept
    def jumps(setting: float) -> float:
        return 0.45 if setting < 1e-3 else 0.56

    calls: list[float] = []
    search = drape_search(0.5, reader(jumps, calls), 2e-3, BOUNDS, [])
    assert search.outcome == "stalled" and search.runs == len(calls) <= DRAPE_MAX_RUNS
    assert search.best[1] == 0.45 and max(c for c in calls if c < 1e-3) > 1e-3 / 1.05


def test_readings_that_jump_in_steps_are_bracketed_not_chased() -> None:
    """The folds change in steps: a law that reads in steps of 0.015 (a fold more or less)
    gives two nearby settings the same reading, a secant through them no slope; between
    readings on either side of the number the search still closes in (from a start near
    the fabric's range: from Blender's default 0.5 the steps down take most of the runs)."""

    def steps(setting: float) -> float:
        return round(law(setting) / 0.015) * 0.015

    for target in (0.3, 0.507, 0.62, 0.9):
        calls: list[float] = []
        search = drape_search(target, reader(steps, calls), 0.01, BOUNDS, [])
        assert search.outcome == "matched", (target, search, calls)
        assert abs(search.best[1] - target) <= DRAPE_AIM and search.runs <= DRAPE_MAX_RUNS


@pytest.mark.parametrize("function", [law, noisy], ids=["smooth", "noisy"])
@pytest.mark.parametrize("target", [0.3, 0.5, 0.9])
def test_four_settings_at_a_time_reach_the_number_in_fewer_reads(function, target: float) -> None:
    """A GPU reads four settings in about one's time: from Blender's default the search
    spreads each read along its step or across its bracket, and needs at most four reads
    (one at a time it took up to eight), each of at most four settings."""
    for start in (0.5, 0.01, 1e-5):
        calls: list[float] = []
        reads: list[int] = []
        search = drape_search(target, reader(function, calls, reads=reads), start, BOUNDS, [], width=4)
        assert search.outcome == "matched", (start, search)
        assert abs(search.best[1] - target) <= DRAPE_AIM
        assert len(reads) <= 4 and max(reads) <= 4 and search.runs == len(calls) == sum(reads)
        assert len(set(calls)) == len(calls)  # no setting read twice


def test_runs_near_the_last_rounds_shape_the_first_read() -> None:
    """A round whose other settings moved a little (here the law shifted by 0.015) starts
    from the last round's runs: its first read lies around their answer and matches, where
    a search without them spreads decades from that answer and needs another read."""
    last_round: list = []
    drape_search(0.5, reader(noisy, []), 0.5, BOUNDS, last_round, width=4)

    def shifted(setting: float) -> float:
        return noisy(setting) + 0.015

    answer = drape_search(0.5, reader(noisy, []), 0.5, BOUNDS, list(last_round), width=4).best[0]
    primed_reads: list[int] = []
    primed = drape_search(
        0.5, reader(shifted, [], reads=primed_reads), answer, BOUNDS, [], width=4, prior=last_round
    )
    bare_reads: list[int] = []
    bare = drape_search(0.5, reader(shifted, [], reads=bare_reads), answer, BOUNDS, [], width=4)
    assert primed.outcome == bare.outcome == "matched"
    assert len(primed_reads) == 1 < len(bare_reads)


def test_a_start_at_a_bound_reads_the_other_bound_next() -> None:
    """The shear's search starts at its top, where the reading lies flat: the second read is
    the floor, which brackets the number (then interpolated) or shows it out of reach at
    once, where decades down the flat top cost reads (measured on shirting's drape: 0.755 at
    the top, 0.730 a decade down, 0.464 at the floor)."""
    shear_bounds = (1e-6, 5e-3)

    def shear(setting: float) -> float:  # flat from the top down to 1e-4, 0.45 at the floor
        return 0.45 + 0.31 / (1.0 + math.exp(-1.3 * math.log(setting / 2e-5)))

    calls: list[float] = []
    search = drape_search(0.5, reader(shear, calls), 5e-3, shear_bounds, [])
    assert calls[:2] == [5e-3, 1e-6]
    assert search.outcome == "matched" and abs(search.best[1] - 0.5) <= DRAPE_AIM
    assert len(calls) <= 5
    # a drape the shear cannot bring down to the number: out of reach in two reads, the
    # floor's reading the nearest
    calls = []
    search = drape_search(0.4, reader(shear, calls), 5e-3, shear_bounds, [])
    assert search.outcome == "unreachable" and calls == [5e-3, 1e-6]
    assert search.best[:2] == (1e-6, shear(1e-6))
