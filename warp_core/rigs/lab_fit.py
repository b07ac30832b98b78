"""Blender cloth settings from any set of a fabric's lab numbers: one entry over the rigs.

Each lab number has the rig that reads it and the setting it moves most; the fit runs them in
an order where each rig's setting is decided before a later rig depends on it:

1. the weight gives the vertex mass (no rig: one quad's area per vertex);
2. the elongation along the grain (the tensile strip) gives the tension, compression equal;
3. the elongation at 45 degrees (the bias strip) gives the shear;
4. the bending length (the cantilever) gives the bending;
5. the drape coefficient (Cusick's rig) gives the bending where no bending length was given,
   else the shear where no bias elongation was given, else it is only read and reported: the
   fabric's other numbers have fixed every setting the drape depends on.

A rig whose number cannot be reached in Blender's ranges says so (``unreachable``) with its
nearest reading, and the fit carries on with the nearest setting: the other numbers are still
met where they can be.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..devices import placed_device
from ..mesh import ClothMesh
from ..models.blender_cloth.params import PARAMETER_BOUNDS, ClothParams
from . import fabric
from .cantilever import IN_PLANE_CEILING, CantileverRig, cantilever_strip, rig_settings
from .drape import DrapeRig, drape_scale, drape_settings, drape_specimen, run_drapes
from .drape_search import DRAPE_READ_BACK, drape_search
from .fabric import EDGE_RANGE_MM, FabricNumbers, fabric_rig, fit_bending, read_bending_length, vertex_mass
from .fabric_result import OUTCOME_ORDER, FabricResult, RigResult, devices_text
from .tensile import StripReading, StripRig, fit_shear, fit_tension, run_strip, strip_mesh

__all__ = ["FabricFitCancelled", "fit_fabric"]


class FabricFitCancelled(Exception):
    """Raised by :func:`fit_fabric` between rig runs when its ``should_stop`` says so."""


# a rig's reading at the final settings within this of the lab's number counts as read back
# (relative; the drape coefficient's absolute): each rig's own fit stops within it
READ_BACK = {"bending_length_mm": 0.01, "elongation_percent": 0.01, "bias_elongation_percent": 0.01}
# each number as the progress names it: (words, unit)
NUMBER_TEXT = {
    "bending_length_mm": ("bending length", " mm"),
    "drape_coefficient": ("drape coefficient", ""),
    "elongation_percent": ("elongation", " %"),
    "bias_elongation_percent": ("bias elongation", " %"),
}
# the rigs' alternation: rounds at most, and the relative change of every fitted setting from
# one round to the next under which it stops
# (the drape's setting more loosely: its reading moves by +-0.003 from run to run, a few
# percent of the setting)
ROUNDS, SETTLED, DRAPE_SETTLED = 4, 0.003, 0.03
# settings the drape's search reads at once (``run_drapes``): one. On the H200 four settings
# in one batch took 2.2x one setting's time (the batch runs until its slowest member settles,
# and a frame of it costs 1.4x one setting's), and the search needed more settings than reads
# saved (shirting: 20 settings in 5 reads, 86 s, against 9 runs of about 9 s one at a time)
DRAPE_WIDTH = 1
# the order the rigs are fitted in within a round
FIT_ORDER = ("bias_elongation_percent", "elongation_percent", "bending_length_mm", "drape_coefficient")


@dataclass
class _Rig:
    """A rig's running account inside :func:`fit_fabric`: what it reads and how to read it."""

    name: str
    number: str
    setting: str
    requested: float  # the lab's number, in the rig's reading's unit
    read: Callable[[ClothParams], tuple[float, bool, tuple]]  # settings -> (reading, settled, starts)
    # the drape's: several settings -> their readings, and how many it reads at once
    read_many: Callable[[list[ClothParams]], list[tuple[float, bool, tuple]]] | None = None
    width: int = 1
    strip: StripRig | None = None  # the tensile and bias rigs' strip
    drape: DrapeRig | None = None  # the drape rig's
    cantilever: CantileverRig | None = None  # the cantilever's
    device: str = "cpu"  # where it runs
    # the settings of its fit's best run and that run's (reading, settled, starts): read
    # again only where a later rig changed them
    known: tuple[ClothParams, float, bool, tuple] | None = None
    # the drape's runs so far, (setting, reading, settled, starts), and the other settings
    # they ran at: a later round goes on from them where the rig simulates the same (``_same_run``)
    tried: list[tuple[float, float, bool, tuple]] = field(default_factory=list)
    tried_at: ClothParams | None = None
    outcome: str = "stalled"
    runs: int = 0
    seconds: float = 0.0


def fit_fabric(
    numbers: FabricNumbers,
    edge_m: float = 0.01,
    base: ClothParams | None = None,
    device: str = "auto",
    precision: str = "float64",
    progress: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> FabricResult:
    """The Blender cloth settings for ``numbers`` on a quad mesh of ``edge_m`` edges, starting
    from ``base`` (default: Blender's defaults at quality 10); settings no number decides stay
    ``base``'s. ``progress(text)`` hears each rig as it starts; ``should_stop()`` is asked
    between rigs and a True raises :class:`FabricFitCancelled` (nothing is kept). ``device``:
    "cpu", "cuda", "cuda:N", or "auto", which runs each rig where a fit of its size runs
    fastest (``warp_core.devices``: the small strips on the CPU, a large drape on a GPU).

    Every rig is read once more at the final settings, and that reading is the one reported:
    a later rig's setting can move an earlier rig's reading (the shear moves the tensile
    strip's), and a reading that moved off its number by more than it fitted to says so
    (``misfit``)."""
    if not EDGE_RANGE_MM[0] <= edge_m * 1e3 <= EDGE_RANGE_MM[1]:
        raise ValueError(
            f"edge_m = {edge_m!r} is outside the plausible range "
            f"[{EDGE_RANGE_MM[0] * 1e-3:g}, {EDGE_RANGE_MM[1] * 1e-3:g}] m"
        )
    if not numbers.measured:
        raise ValueError(
            "give at least one lab number besides the weight: a bending length, a drape "
            "coefficient or an elongation"
        )
    start = time.perf_counter()
    base = base or ClothParams(quality=10)
    settings = base.replace(mass=vertex_mass(numbers.weight_gsm, edge_m))
    rigs = _rigs(numbers, edge_m, device, precision)

    def begin(rig: _Rig, run: int = 1) -> None:
        """Before a rig's fit or reading, and before each of the drape's runs after its
        first (a drape run takes seconds to minutes): stop if asked, say what runs."""
        if should_stop is not None and should_stop():
            raise FabricFitCancelled("the fabric fit was cancelled")
        if progress is not None:
            name, unit = NUMBER_TEXT[rig.number]
            again = f" (run {run})" if run > 1 else ""
            progress(f"{rig.name}: {name} {getattr(numbers, rig.number):g}{unit}{again}")

    def account(rig: _Rig, outcome: str, runs: int, seconds: float, known: tuple | None = None) -> None:
        rig.outcome, rig.runs, rig.seconds = outcome, rig.runs + runs, rig.seconds + seconds
        rig.known = known

    def fit_one(rig: _Rig, at: ClothParams) -> ClothParams:
        """``at`` with ``rig``'s setting fitted to its number."""
        begin(rig)
        if rig.strip is not None:
            fitter = fit_tension if rig.number == "elongation_percent" else fit_shear
            fit = fitter(getattr(numbers, rig.number), at, rig.strip, device=rig.device, precision=precision)
            account(rig, fit.outcome, fit.runs, fit.seconds, (fit.settings, *_strip_values(fit.reading)))
            return fit.settings
        if rig.number == "bending_length_mm":
            if rig.known is not None:
                again = _at(at, rig.setting, getattr(rig.known[0], rig.setting))
                # the rig hangs the strip it read its number on (another rig moved only a
                # stiffness it holds at its ceiling or floor): a search would repeat its runs
                if _same_run(rig, rig.known[0], again) and _reads_back(rig, again, begin, account):
                    account(rig, rig.outcome, 0, 0.0, (again, *rig.known[1:]))
                    return again
            fit = fit_bending(numbers, edge_m, at, rig.device, precision)
            reading = (fit.settings, fit.reading.bending_length_m * 1e3, fit.reading.settled, ())
            account(rig, fit.outcome, fit.runs, fit.seconds, reading)
            return fit.settings
        return _fit_drape(numbers.drape_coefficient, at, rig, account, lambda run: begin(rig, run))

    # The rigs' settings move each other's readings: the shear the tensile strip's by a lot
    # (the diagonals carry a share of the pull; not the cantilever's, which holds the shear
    # at Blender's default at least), the tension the bias strip's a little (the clamp holds
    # the trellis back), bending and shear the drape's. So each rig is fitted at the others'
    # latest values, round after round, until no setting moves by more than SETTLED between rounds.
    # The bias first: it barely depends on the tension
    fitted = [rigs[n] for n in FIT_ORDER if n in rigs and rigs[n].setting]
    last: dict[str, float] = {}
    rounds = ROUNDS if len(fitted) > 1 else 1
    for done in range(1, rounds + 1):
        moved = False
        for rig in fitted:
            settings = fit_one(rig, settings)
            value = getattr(settings, rig.setting)
            settled = DRAPE_SETTLED if rig.number == "drape_coefficient" else SETTLED
            moved |= rig.name not in last or abs(value / last[rig.name] - 1.0) > settled
            last[rig.name] = value
        # the numbers are what is asked for, not settings that no longer move: a round
        # after which every rig already reads its number at these settings is the last
        if not moved or (done < rounds and all(_reads_back(rig, settings, begin, account) for rig in fitted)):
            break
    results = []
    for rig in rigs.values():
        if rig.known is not None and _same_run(rig, rig.known[0], settings):
            _, reading, settled, starts = rig.known
        else:
            begin(rig)
            t0 = time.perf_counter()
            reading, settled, starts = rig.read(settings)
            account(rig, rig.outcome, 1, time.perf_counter() - t0)
        off, limit = _off(rig, reading), _limit(rig)
        outcome = rig.outcome
        if not math.isfinite(off) or off > limit * 1.5:
            # a read-only drape, or a reading a later rig moved: off its number
            outcome = outcome if outcome in ("unreachable", "coarse", "unsettled") else "misfit"
        elif not rig.setting:
            outcome = "matched" if settled else "unsettled"
        results.append(
            RigResult(
                rig.name,
                rig.number,
                rig.setting,
                rig.requested,
                reading,
                outcome,
                rig.runs,
                rig.seconds,
                starts,
                rig.device,
            )
        )
    outcome = next(o for o in OUTCOME_ORDER if o == "matched" or any(r.outcome == o for r in results))
    return FabricResult(
        numbers=numbers,
        edge_m=edge_m,
        settings=settings,
        rigs=tuple(results),
        outcome=outcome,
        seconds=time.perf_counter() - start,
        device=devices_text(results),
    )


def _reads_back(
    rig: _Rig, settings: ClothParams, begin: Callable[[_Rig], None], account: Callable[..., None]
) -> bool:
    """Whether ``rig`` reads its number within its read-back at ``settings``: from its last
    run where that ran at them, else from a run now (kept as that run), except for the drape,
    whose runs are too long to make only to ask."""
    if rig.known is None or not _same_run(rig, rig.known[0], settings):
        if rig.number == "drape_coefficient":
            return False
        begin(rig)
        t0 = time.perf_counter()
        reading, settled, starts = rig.read(settings)
        account(rig, rig.outcome, 1, time.perf_counter() - t0, (settings, reading, settled, starts))
    _, reading, settled, _ = rig.known
    return settled and _off(rig, reading) <= _limit(rig)


def _at(settings: ClothParams, setting: str, value: float) -> ClothParams:
    """``settings`` with ``setting`` and its group maximum at ``value``."""
    return settings.replace(**{setting: value, f"{setting}_max": value})


def _same_run(rig: _Rig, one: ClothParams, other: ClothParams) -> bool:
    """Whether ``rig`` run at ``one`` is its run at ``other``: the drape rig simulates the same
    settings for in-plane stiffnesses the tensile or bias rig moved between a few thousandths
    and Blender's defaults (it raises them to those, ``drape_settings``), so a new round need
    not drape the specimen again to read what it read; the cantilever likewise for a tension
    past its ceiling or a shear below its floor (``cantilever.rig_settings``)."""
    if one == other:
        return True
    if rig.cantilever is not None:
        hung = [rig_settings(s, fabric.scaled_rig(s, rig.cantilever)) for s in (one, other)]
        return hung[0] == hung[1]
    return rig.drape is not None and drape_settings(one, rig.drape) == drape_settings(other, rig.drape)


def _off(rig: _Rig, reading: float) -> float:
    """How far ``reading`` lies from the rig's number as its read-back measures it."""
    if rig.number == "drape_coefficient":
        return abs(reading - rig.requested)
    return abs(reading / rig.requested - 1.0)


def _limit(rig: _Rig) -> float:
    return DRAPE_READ_BACK if rig.number == "drape_coefficient" else READ_BACK[rig.number]


def _rigs(numbers: FabricNumbers, edge_m: float, device: str, precision: str) -> dict[str, _Rig]:
    """The rigs the numbers call for, in the order they are fitted, each with the setting it
    decides ("" for a drape the other numbers have decided)."""

    def placed(mesh: ClothMesh) -> tuple[str, str]:
        return placed_device(device, mesh.vertex_count, precision).device, precision

    rigs: dict[str, _Rig] = {}
    for number, name, setting, bias in (
        ("elongation_percent", "tensile", "tension_stiffness", False),
        ("bias_elongation_percent", "bias", "shear_stiffness", True),
    ):
        if getattr(numbers, number) is not None:
            strip = StripRig(edge_m=edge_m, bias=bias, load_n_per_m=numbers.load_n_per_m)
            run = placed(strip_mesh(strip)[0])
            read = functools.partial(_strip_read, strip, run)
            requested = float(getattr(numbers, number))
            rigs[number] = _Rig(name, number, setting, requested, read, strip=strip, device=run[0])
    if numbers.bending_length_mm is not None:
        cantilever = fabric_rig(edge_m, numbers.bending_length_mm * 1e-3)
        on = placed(cantilever_strip(cantilever)[0])

        def read_cantilever(s: ClothParams) -> tuple[float, bool, tuple]:
            reading = read_bending_length(s, cantilever, *on)
            return reading.bending_length_m * 1e3, reading.settled, ()

        rigs["bending_length_mm"] = _Rig(
            "cantilever",
            "bending_length_mm",
            "bending_stiffness",
            numbers.bending_length_mm,
            read_cantilever,
            cantilever=cantilever,
            device=on[0],
        )
    if numbers.drape_coefficient is not None:
        drape = DrapeRig(edge_m=edge_m)
        at = placed(drape_specimen(drape))

        def read_drapes(many: list[ClothParams]) -> list[tuple[float, bool, tuple]]:
            return [(r.coefficient, r.settled, r.coefficients) for r in run_drapes(many, drape, *at)]

        if numbers.bending_length_mm is None:
            setting = "bending_stiffness"
        elif numbers.bias_elongation_percent is None:
            setting = "shear_stiffness"
        else:
            setting = ""
        rigs["drape_coefficient"] = _Rig(
            "drape",
            "drape_coefficient",
            setting,
            numbers.drape_coefficient,
            lambda s: read_drapes([s])[0],
            read_many=read_drapes,
            width=DRAPE_WIDTH,
            drape=drape,
            device=at[0],
        )
    return rigs


def _strip_read(strip: StripRig, run: tuple[str, str], settings: ClothParams) -> tuple[float, bool, tuple]:
    return _strip_values(run_strip(settings, strip, *run))


def _strip_values(reading: StripReading) -> tuple[float, bool, tuple]:
    return reading.elongation_percent, reading.settled, ()


def _fit_drape(
    target: float,
    settings: ClothParams,
    rig: _Rig,
    account: Callable[..., None],
    before_run: Callable[[int], None],
) -> ClothParams:
    """The drape rig's setting (bending or shear, its group maximum with it) at which the rig
    reads the drape coefficient ``target`` (:func:`~.drape_search.drape_search`), going on
    from an earlier round's runs where they are runs at these settings (``_same_run``; else
    its first read centred on them); ``before_run(n)`` is called before the
    search's n-th read from the second on (stop or progress)."""
    t0 = time.perf_counter()
    low, high = PARAMETER_BOUNDS[rig.setting]
    floor = max(low, 1e-6)

    def at(value: float) -> ClothParams:
        return _at(settings, rig.setting, value)

    if rig.setting in IN_PLANE_CEILING and rig.drape is not None:
        # the rig raises a soft in-plane stiffness with the weight only up to Blender's
        # default, so above default / scale the drape does not see it
        high = min(high, IN_PLANE_CEILING[rig.setting] / drape_scale(settings, rig.drape))
    value = min(max(getattr(settings, rig.setting), floor), high)
    others = at(0.0)
    prior: list = []
    earlier = rig.tried_at
    if earlier is None or not all(_same_run(rig, _at(earlier, rig.setting, v), at(v)) for v, *_ in rig.tried):
        # the reading moves by up to 0.03 with a fraction of a percent of the bending (a fold
        # more or less), so runs at other settings are no reading of these: they only
        # centre the first read
        prior, rig.tried = rig.tried, []
    rig.tried_at = others
    search = drape_search(
        target,
        lambda values: rig.read_many([at(v) for v in values]),
        value,
        (floor, high),
        rig.tried,
        width=rig.width,
        before_run=before_run,
        prior=prior,
    )
    best_value, best, settled, starts = search.best
    account(
        rig, search.outcome, search.runs, time.perf_counter() - t0, (at(best_value), best, settled, starts)
    )
    return at(best_value)
