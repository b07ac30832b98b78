"""Robustness benchmark: does the fit recover cloth made by Blender's own solver, on scenes no
test has seen, from Blender's default values (what a new user starts from)?

    python bench/robustness.py all --out DIR [--count 40] [--seed 1] [--check-truth]
    python bench/robustness.py generate --out DIR [--count 40] [--seed 1]      # bpy
    python bench/robustness.py fit --out DIR [--device cuda] [--precision float32]   # no bpy
    python bench/robustness.py replay --out DIR [--check-truth] [--markdown FILE]    # bpy
    python bench/robustness.py table --out DIR [--markdown FILE]

The table of a whole set (no ``--only``) is also recorded as the latest run in
``bench/results/robustness.json`` and shown in ``docs/benchmarks.md``.

Scenes (seeded, reproducible): square sheets of 6-20 vertices per side, 0.5-2 m, quads or
triangles; pinned along one edge row, two rows, at two corners, on a keyframed object, or
hooked to a keyframed empty; quality 4-10; 1-3 target frames in 10-60. Each fits 2-4 of
tension (= compression), bending, air damping and tension damping, whose true values are
drawn log-uniform (5-150, 0.05-20, 0.2-8, 1-40); everything else is Blender's default.

1. ``generate`` builds each scene with the true values, lets Blender's cloth make the
   targets, resets the cloth to Blender's defaults and writes ``scene_NN.blend``, the
   problem file ``scene_NN.npz`` (exported by the add-on, as the batch command does) and
   ``scenes.json`` (every scene's spec, truth, start values and motion).
2. ``fit`` runs ``python -m warp_core fit`` on every problem file: ``scene_NN.result.json``
   (the fit's result summary), ``scene_NN.fit.log`` and ``fits.json`` (one record per
   scene: fitted values, time, stop reason, outcome, or the error). It reads and writes only
   DIR and needs only numpy and warp-lang, so DIR can be copied to a GPU machine for it.
3. ``replay`` opens each ``scene_NN.blend``, writes the fitted values into the cloth
   modifier, runs Blender's cloth and measures the RMSE against the targets:
   ``replays.json``, then the table. Success: replay RMSE <= 1 mm. ``--check-truth`` also
   replays the true values (must give the targets back) and evaluates the fit's own model
   at the truth (how close any fit can get).

Phase times go to ``timings.json``. Not part of the test suite (minutes to an hour).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from results import record as record_results
from robustness_fit import FitOptions, fit_scene
from robustness_scenes import (
    JITTER,
    FitRecord,
    GeneratedScene,
    ReplayRecord,
    draw_scenes,
    load_generated,
    load_records,
    read_json,
    record_timing,
    save_records,
    write_json,
)
from robustness_table import LEGEND, Row, cells, headers, markdown_table, summary_lines, text_table

if TYPE_CHECKING:
    from robustness_blender import AddonSide  # imports bpy: only the Blender phases load it


def selected(scenes: list[GeneratedScene], only: list[int] | None) -> list[GeneratedScene]:
    return [s for s in scenes if only is None or s.spec.index in only]


def say(text: str) -> None:
    print(text, flush=True)


def run_generate(args: argparse.Namespace) -> None:
    from robustness_blender import generate_scene, load_addon_side

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    side = load_addon_side()
    t0 = time.perf_counter()
    path = out / "scenes.json"
    generated = {s.spec.index: s for s in load_generated(out)} if path.is_file() else {}
    for spec in draw_scenes(args.seed, args.count, args.first):
        t = time.perf_counter()
        try:
            scene = generate_scene(spec, out, side)
        except Exception as e:  # a scene the add-on refuses is a finding, not the end of the run
            traceback.print_exc()
            scene = GeneratedScene(spec, {}, 0.0, 0.0, 0, error=f"{type(e).__name__}: {e}")
        scene.seconds = time.perf_counter() - t
        generated[spec.index] = scene
        what = scene.error or f"motion {scene.motion_m:.3f} m, stretch {scene.max_stretch:.2f}"
        say(f"{spec.name}: {spec.grid}x{spec.grid} {spec.pins}, {what}, {scene.seconds:.1f} s")
        scenes = [generated[k].to_dict() for k in sorted(generated)]
        # after every scene: an interrupted run keeps what it made
        write_json(path, {"version": 1, "seed": args.seed, "scenes": scenes})
    record_timing(out, "generate", time.perf_counter() - t0)


def run_fit(args: argparse.Namespace) -> None:
    """Fit every selected scene; ``--jobs N`` runs N fit processes at once (a GPU machine
    with many cores keeps its device busy that way; each fit is still its own process)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    out: Path = args.out
    options = FitOptions(args.device, args.precision, args.max_iters, args.time_budget, args.timeout)
    path = out / "fits.json"
    records: dict[int, FitRecord] = load_records(path, FitRecord)
    meta = {"version": 1, "device": args.device, "precision": args.precision, "max_iters": args.max_iters}
    t0 = time.perf_counter()
    scenes = [scene for scene in selected(load_generated(out), args.only) if not scene.error]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(fit_scene, out, scene.spec, options): scene for scene in scenes}
        for future in as_completed(futures):
            scene, record = futures[future], future.result()
            records[scene.spec.index] = record
            save_records(path, records, meta)  # after every scene: a partial run keeps its numbers
            what = record.error or f"{record.outcome or record.stop_reason}, fit RMSE {record.rmse_m} m"
            say(f"{scene.spec.name}: {record.wall_s:.1f} s, {what}")
    record_timing(out, f"fit_{args.device}_{args.precision}", time.perf_counter() - t0)


def replay_scene(
    out: Path, scene: GeneratedScene, fit: FitRecord | None, check_truth: bool, side: AddonSide
) -> ReplayRecord:
    from robustness_blender import model_rmse, replay

    record = ReplayRecord(scene.spec.index)
    t0 = time.perf_counter()
    try:
        if fit is not None and not fit.error:
            record.rmse_m, record.max_error_m = replay(out, scene.spec, fit.params, side)
        if check_truth:
            record.truth_rmse_m = replay(out, scene.spec, scene.spec.truth, side)[0]
            record.truth_model_rmse_m = model_rmse(out, scene.spec, scene.spec.truth, side)
            jittered = {k: v * (1.0 + JITTER) for k, v in scene.spec.truth.items()}
            record.jitter_rmse_m = replay(out, scene.spec, jittered, side)[0]
    except Exception as e:  # one broken scene must not end the run
        record.error = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    record.seconds = time.perf_counter() - t0
    return record


def replay_text(record: ReplayRecord) -> str:
    parts = [
        f"{label} {value:.3g} m"
        for label, value in (
            ("replay RMSE", record.rmse_m),
            ("truth replay RMSE", record.truth_rmse_m),
            ("model at truth RMSE", record.truth_model_rmse_m),
            ("jittered truth RMSE", record.jitter_rmse_m),
        )
        if value is not None
    ]
    return ", ".join(parts + ([record.error] if record.error else [])) or "nothing to replay"


def run_replay(args: argparse.Namespace) -> None:
    from robustness_blender import load_addon_side

    out: Path = args.out
    side = load_addon_side()
    fits = load_records(out / "fits.json", FitRecord)
    path = out / "replays.json"
    records: dict[int, ReplayRecord] = load_records(path, ReplayRecord)
    t0 = time.perf_counter()
    for scene in selected(load_generated(out), args.only):
        if scene.error:
            continue
        record = replay_scene(out, scene, fits.get(scene.spec.index), args.check_truth, side)
        records[scene.spec.index] = record
        save_records(path, records, {"version": 1})
        say(f"{scene.spec.name}: {replay_text(record)}")
    record_timing(out, "replay", time.perf_counter() - t0)
    run_table(args)


def run_table(args: argparse.Namespace) -> None:
    out: Path = args.out
    fits = load_records(out / "fits.json", FitRecord)
    replays = load_records(out / "replays.json", ReplayRecord)
    scenes = selected(load_generated(out), args.only)
    rows = [Row(s, fits.get(s.spec.index), replays.get(s.spec.index)) for s in scenes]
    checked = any(r.replay is not None and r.replay.truth_rmse_m is not None for r in rows)
    check_truth = args.check_truth or checked
    say(text_table(rows, check_truth))
    if args.markdown:
        Path(args.markdown).write_text(markdown_table(rows, check_truth), encoding="utf-8")
    if args.only is None:  # a whole set: the latest run, for docs/benchmarks.md
        record_run(out, rows, check_truth)


def record_run(out: Path, rows: list[Row], check_truth: bool) -> None:
    """Record this set's table and summary as the benchmark's latest run (bench/results/)."""
    fits = read_json(out / "fits.json") if (out / "fits.json").is_file() else {}
    seed = read_json(out / "scenes.json").get("seed")
    device = f"fits on {fits.get('device', '?')}, {fits.get('precision', '?')}"
    summary: dict[str, object] = {"seed": seed, "scenes": len(rows)}
    for line in summary_lines(rows, check_truth):
        label, _, value = line.partition(": ")
        summary[label] = value
    table = (headers(check_truth), [cells(r, check_truth) for r in rows])
    record_results("robustness", summary, table, [LEGEND], device=device)


def run_all(args: argparse.Namespace) -> None:
    run_generate(args)
    run_fit(args)
    run_replay(args)


def indices(text: str) -> list[int]:
    """``3,5,10-12`` -> [3, 5, 10, 11, 12]."""
    chosen: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        chosen += list(range(int(low), int(high or low) + 1))
    return chosen


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python bench/robustness.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="phase", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, required=True, help="folder of the scenes, fits and replays")
    common.add_argument("--only", type=indices, default=None, help="scene indices, e.g. 0-9 or 3,7")
    gen = argparse.ArgumentParser(add_help=False)
    gen.add_argument("--count", type=int, default=40)
    gen.add_argument("--seed", type=int, default=1)
    gen.add_argument("--first", type=int, default=0, help="index of the first scene")
    fit = argparse.ArgumentParser(add_help=False)
    fit.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    fit.add_argument("--precision", choices=["float64", "float32"], default="float64")
    fit.add_argument("--max-iters", type=int, default=30)
    fit.add_argument("--time-budget", type=float, default=None, help="seconds per fit (default: none)")
    fit.add_argument("--timeout", type=float, default=1800.0, help="seconds before a fit is abandoned")
    fit.add_argument("--jobs", type=int, default=1, help="fit processes at once (default 1)")
    rep = argparse.ArgumentParser(add_help=False)
    rep.add_argument("--check-truth", action="store_true", help="also replay the true values")
    rep.add_argument("--markdown", help="also write the table as Markdown to this file")
    phases = {
        "generate": ([common, gen], run_generate, "make the scenes and their problem files (bpy)"),
        "fit": ([common, fit], run_fit, "fit every problem file (numpy and warp-lang only)"),
        "replay": ([common, rep], run_replay, "replay the fits in Blender's cloth, print the table (bpy)"),
        "table": ([common, rep], run_table, "print the table of what the phases wrote"),
        "all": ([common, gen, fit, rep], run_all, "generate, fit and replay"),
    }
    for name, (parents, func, text) in phases.items():
        sub.add_parser(name, parents=parents, help=text, description=text).set_defaults(func=func)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
