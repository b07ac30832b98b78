"""The batch command's arguments: the parser, the exit codes, and the one-line error every
bad argument or input ends in."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import bpy

from ...warp_core.errors import UserError, abridged
from ...warp_core.fit.problem.maps import DEFAULT_SMOOTHNESS
from ..models.registry import MODEL_NAMES, parameter_names, scene_model
from ..request import TargetSpec

COMMAND_ID = "fit_to_target"
PROG = "fit-to-target"

EXIT_OK = 0
EXIT_USAGE = 2  # bad arguments, missing file / object / target, input the fit cannot use
EXIT_FIT_FAILED = 3  # a fit, its bake or writing an output failed; the report is still written
# every fit ran and was written back, but at least one does not match its targets (outcome
# misfit or stalled): the values are the best found, not an answer to trust
EXIT_NOT_CONVERGED = 4  # the default; --misfit-exit chooses another (0: an honest misfit is done)
EXIT_INTERRUPTED = 130  # SIGINT (143: SIGTERM): partial report, nothing saved after the signal

FLOAT32_MAX = 3.4028234663852886e38  # the largest number a Blender setting holds
NAME_BYTES = 255  # the longest name of a Blender data-block, in UTF-8 bytes
# options whose values name data-blocks of the scene, and how each value splits into names
NAME_OPTIONS: dict[str, Callable[[str], list[str]]] = {
    "--object": lambda value: [value],
    "--target": lambda value: [value.rpartition("@")[0] or value],
    "--target-tracks": lambda value: list(value.partition(":")[::2]),
    "--camera": lambda value: [value],
    "--fit-map": lambda value: [value.partition(":")[2]],
    "--map-regions": lambda value: value.split(","),
}
# the weight maps some model fits (--fit-map KIND)
MAP_KINDS = tuple(dict.fromkeys(kind for m in MODEL_NAMES.values() for kind in scene_model(m).map_kinds))


class UsageError(UserError):
    """Bad arguments or input: exit 2 with this one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + exit
        raise UsageError(message)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        joined = None if args is None else join_option_values(self, list(args))
        parsed = super().parse_args(joined, namespace)
        check_names(parsed)
        return parsed


def check_names(args: argparse.Namespace) -> None:
    """The names given on the command line (:data:`NAME_OPTIONS`) are names Blender can
    have: UTF-8 text (a shell passes any bytes) of at most :data:`NAME_BYTES` bytes."""
    for option, split in NAME_OPTIONS.items():
        given = getattr(args, option[2:].replace("-", "_"), None)
        for value in [given] if isinstance(given, str) else given or []:
            raw = value.encode("utf-8", "surrogateescape")
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                shown = raw.decode("utf-8", "backslashreplace")
                raise UsageError(
                    f"{option} {shown}: not UTF-8 text (Blender's names are); check the shell's "
                    "encoding or the script that made the command line"
                ) from None
            for name in split(value):
                if len(name.encode("utf-8")) > NAME_BYTES:
                    raise UsageError(
                        f"{option} {name[:24]}...: a name of {len(name)} characters; Blender's names "
                        f"are at most {NAME_BYTES} bytes, so the scene has nothing by that name"
                    )


def join_option_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``--object -x`` as ``--object=-x``: the word after an option that takes a value is
    that value, even when it starts with ``-`` (an object named "-x", a negative number)."""
    takes_value = {
        s
        for action in parser._actions
        if action.nargs is None and action.option_strings
        for s in action.option_strings
    }
    out: list[str] = []
    k = 0
    while k < len(argv):
        word = argv[k]
        if word == "--":
            out += argv[k:]
            break
        if word in takes_value and k + 1 < len(argv):
            out.append(f"{word}={argv[k + 1]}")
            k += 2
            continue
        out.append(word)
        k += 1
    return out


def positive_number(unit: str, scale: float = 1.0) -> Callable[[str], float]:
    """An argparse type: a finite number of ``unit`` above 0 (nan and inf are not limits) and
    at most what a Blender setting holds (larger ones overflow where they are squared),
    returned times ``scale``."""

    def parse(text: str) -> float:
        shown = abridged(text, 40)
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{shown}' is not a number of {unit}") from None
        if not math.isfinite(value) or value <= 0.0:
            raise argparse.ArgumentTypeError(f"'{shown}' is not a finite number of {unit} above 0")
        if value > FLOAT32_MAX:
            raise argparse.ArgumentTypeError(
                f"'{shown}' is more than {FLOAT32_MAX:.3g} {unit}, the most a Blender setting holds"
            )
        return value * scale

    return parse


def whole_number(what: str, least: int, most: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number of ``what`` from ``least`` to ``most``."""

    def parse(text: str) -> int:
        shown = abridged(text, 40)
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{shown}' is not a whole number of {what}") from None
        if value < least or (most is not None and value > most):
            within = f"from {least} to {most}" if most is not None else f"at least {least}"
            raise argparse.ArgumentTypeError(f"'{shown}' is not {within}")
        return value

    return parse


def exit_status(text: str) -> int:
    """``--misfit-exit N``: an exit status (0 to 255) that no other end of a run has."""
    value = whole_number("exit status", 0, 255)(text)
    if value in (EXIT_USAGE, EXIT_FIT_FAILED, EXIT_INTERRUPTED, 128 + 15):
        raise argparse.ArgumentTypeError(
            f"{value} already means something else (2 bad input, 3 failed, 130/143 interrupted); "
            "choose 0, 4 or another free status"
        )
    return value


positive_seconds = positive_number("seconds")  # --time-budget
tolerance_mm = positive_number("millimetres", scale=1e-3)  # --tolerance, in metres


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description="Fit cloth material settings to target shapes, headless.",
        epilog="Exit codes: 0 every fit converged (targets matched), 2 bad arguments or input (only the "
        "report is written, naming the input), 3 a fit, bake or output failed (report still written), 4 a "
        "fit ran but does not match its targets (outcome misfit or stalled; --misfit-exit chooses this "
        "code), 130/143 interrupted by SIGINT/SIGTERM (partial report, nothing saved after the signal).",
        allow_abbrev=False,  # an abbreviation would change meaning when an option is added
    )
    p.add_argument("scene", nargs="?", help="the .blend file (optional when Blender has opened one)")
    p.add_argument(
        "--object",
        action="append",
        default=[],
        metavar="NAME",
        help="object to fit (repeatable); default: every object with fit targets",
    )
    p.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="NAME@FRAME",
        help="target mesh object and frame (repeatable); replaces the saved targets",
    )
    p.add_argument(
        "--target-tracks",
        metavar="CLIP[:TRACKING_OBJECT]",
        help="fit to the markers of this Movie Clip's tracks (its camera tracks, or those of the named "
        "tracking object) seen through the object's Camera, else the scene camera; needs --object; the "
        "tracks are bound as in the panel's binding list, else automatically",
    )
    p.add_argument(
        "--camera",
        metavar="NAME",
        help="the camera that filmed the tracks (default: the object's Camera for its Tracks target, "
        "else the scene camera); saved by --save",
    )
    p.add_argument(
        "--tolerance-px",
        type=positive_number("pixels"),
        metavar="PX",
        help="reprojection RMSE in pixels that counts as matching tracks (default: the object's "
        "setting, else 1 px)",
    )
    models = list(MODEL_NAMES.values())
    p.add_argument(
        "--model",
        choices=models,
        help="the material model to fit with (default: each object's choice in its Fit settings, which "
        "unless picked is the model of its physics modifier); saved with the scene by --save",
    )
    names = "; ".join(f"{m}: {', '.join(parameter_names(m))}" for m in models)
    map_kinds = "; ".join(
        f"{m}: {', '.join(k for k in scene_model(m).map_kinds if scene_model(m).map_targets[k].offered)}"
        for m in models
        if scene_model(m).map_kinds
    )
    p.add_argument("--fit", metavar="P1,P2,...", help="parameters to fit (" + names + ")")
    p.add_argument("--no-ties", action="store_true", help="fit the listed parameters independently")
    p.add_argument(
        "--fit-map",
        action="append",
        default=[],
        metavar="KIND[:GROUP]",
        help="fit the weight map of a vertex group the model reads as well (repeatable; KIND: "
        f"{map_kinds}), written into GROUP, else the group the model names for it (the Cloth modifier's, "
        "a soft body's Stiffness or Damping Group), else a new one; a soft body's maps need "
        "--map-regions; without --fit only the maps are fitted",
    )
    p.add_argument(
        "--map-regions",
        metavar="G1,G2,...",
        help="the painted vertex groups that are the regions of every --fit-map, one value each; "
        "without it a map is free (one weight per vertex)",
    )
    p.add_argument(
        "--map-smoothness",
        type=float,
        metavar="X",
        help=f"a free map's smoothness prior, at least 0 (default {DEFAULT_SMOOTHNESS:g})",
    )
    p.add_argument(
        "--device",
        help="cpu, cuda, cuda:N or AUTO (a cloth on the GPU from the vertex count at which a fit there "
        "was measured faster than on the CPU, assets/device_crossover.json; else the CPU; a soft body on "
        "the first CUDA device); CUDA devices are counted "
        "among those CUDA_VISIBLE_DEVICES leaves visible, so a farm gives a task its GPU either way "
        "(default: the object's setting)",
    )
    p.add_argument("--max-iters", type=int, metavar="N", help="maximum optimizer iterations")
    p.add_argument(
        "--time-budget", type=positive_seconds, metavar="SECONDS", help="stop each fit after this long"
    )
    p.add_argument(
        "--tolerance",
        type=tolerance_mm,
        metavar="MM",
        help="RMSE in millimetres that counts as matching the targets (default: the object's "
        "setting, else the smaller of 1 mm and 0.1%% of the motion)",
    )
    p.add_argument(
        "--loss",
        choices=("vertex", "surface", "auto"),
        help="vertex: same topology, vertex by vertex; surface: any target mesh; auto: vertex when "
        "every target has the cloth's vertex count (default: the object's setting, else vertex)",
    )
    p.add_argument(
        "--allow-unmodeled",
        action="store_true",
        help="fit even when a cloth uses settings the fit does not simulate (self collision, some force "
        "fields, a pressure group, ...); each becomes a warning in the report",
    )
    p.add_argument(
        "--shared",
        action="store_true",
        help="fit one set of values for all the objects together (pieces of one fabric under different "
        "conditions) instead of one set each; the first object's parameters, ties and start values lead",
    )
    p.add_argument(
        "--preset",
        metavar="NAME|FILE",
        help="start values from a material preset: a preset's name, or a preset file (a path with a "
        "folder or ending in .json, such as one --save-preset wrote)",
    )
    p.add_argument(
        "--save-preset",
        metavar="OUT.json",
        help="write the fitted values as a preset file (one object, or one --shared material; only when "
        "the fit converged); --preset FILE starts another fit from it",
    )
    p.add_argument(
        "--apply",
        action="append",
        default=[],
        metavar="REPORT",
        help="write the fitted values of earlier runs' reports (--report) into the scene instead of "
        "fitting (repeatable; a folder: every .json in it); with --bake and --save, a farm's last task",
    )
    p.add_argument("--save", metavar="OUT.blend", help="save the fitted scene here")
    p.add_argument(
        "--in-place",
        action="store_true",
        help="allow the outputs to replace the input file and the files it uses: without --save, save "
        "over the input; --save may be the input, and --bake may replace the caches it plays (as a "
        "bake to its //fit_cache folder does); refused otherwise",
    )
    p.add_argument("--report", metavar="OUT.json", help="write a JSON report")
    p.add_argument(
        "--bake",
        metavar="DIR",
        help="bake each fitted object to DIR/<object>-<hash>.pc2; with --save, the caches are renamed "
        "into place only with the saved .blend",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="an object whose input, fit or bake fails is reported as failed and the others are still "
        "baked and saved (exit 3); without it, one failure leaves every output but the report unwritten",
    )
    p.add_argument(
        "--misfit-exit",
        type=exit_status,
        default=EXIT_NOT_CONVERGED,
        metavar="N",
        help="the exit status when every fit ran but one does not match its targets (default 4; 0 lets a "
        "farm count an honest misfit as done)",
    )
    p.add_argument(
        "--log",
        metavar="OUT.jsonl",
        help="write progress as JSON lines (one event per line, each with its UTC time): the run, "
        "each object's start (k of N) and end, iterations, bake, save",
    )
    p.add_argument(
        "--threads",
        type=whole_number("threads", 1),
        metavar="N",
        help="use at most N CPU threads for the fit's simulations (default: every core this process may use)",
    )
    p.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    return p


def parse_fit(text: str) -> list[str]:
    """``--fit P1,P2,...``: the parameters, once each, in the order given (each must belong to
    some model; the fit checks them against its object's model)."""
    known = list(dict.fromkeys(n for m in MODEL_NAMES.values() for n in parameter_names(m)))
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"--fit: unknown parameter(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    if not names:
        raise UsageError("--fit: no parameters given")
    return list(dict.fromkeys(names))


def parse_tracks(spec: str) -> tuple[str, str]:
    """``--target-tracks CLIP[:TRACKING_OBJECT]``: a Movie Clip of the open scene file and one of
    its tracking objects ("" for the camera's tracks)."""
    name, _, tracking_object = spec.partition(":")
    clip = bpy.data.movieclips.get(name)
    if clip is None:
        known = ", ".join(c.name for c in bpy.data.movieclips) or "none"
        raise UsageError(f"--target-tracks {spec}: no Movie Clip named '{name}' (the file has: {known})")
    if tracking_object and clip.tracking.objects.get(tracking_object) is None:
        known = ", ".join(o.name for o in clip.tracking.objects)
        raise UsageError(
            f"--target-tracks {spec}: Movie Clip '{name}' has no tracking object '{tracking_object}' "
            f"(it has {known})"
        )
    return name, tracking_object


def parse_target(spec: str) -> TargetSpec:
    """``--target NAME@FRAME``: a mesh object of the open scene file at a frame."""
    name, sep, frame = spec.rpartition("@")
    if not sep or not name:
        raise UsageError(f"--target {spec}: expected NAME@FRAME")
    try:
        frame_number = int(frame)
    except ValueError:
        raise UsageError(f"--target {spec}: frame '{frame}' is not a whole number") from None
    ob = bpy.data.objects.get(name)
    if ob is None:
        raise UsageError(f"--target {spec}: no object named '{name}'")
    if ob.type != "MESH":
        raise UsageError(f"--target {spec}: '{name}' is not a mesh ({ob.type.lower()})")
    return TargetSpec(frame=frame_number, object_name=name)


def not_a_file(given: str, path: Path) -> str:
    """Why the scene argument is no file Blender could open."""
    if not path.exists():
        return f"no such file: {given}"
    kinds = ((path.is_dir, "a folder"), (path.is_fifo, "a FIFO (named pipe)"), (path.is_socket, "a socket"))
    kind = next((name for test, name in kinds if test()), "a device")
    return f"{given} is {kind}, not a .blend file"
