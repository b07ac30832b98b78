"""Weight-map benchmark: region and free stiffness maps fitted on seeded scenes made by
Blender's own cloth, written back through the add-on and replayed in Blender's cloth; and
the free map's tape gradient against differences of the whole rollout.

    python bench/maps.py --out DIR [--seed 1] [--regions 10] [--free 5] [--gradient 5]
        [--direction-kind signs|smooth]
    python bench/maps.py --out DIR --quick          # a smoke run: one small region scene

Scenes (``map_scenes``): square sheets of 8-14 vertices per side, 0.6-1.5 m, lying flat and
released to hang from one edge row, two corners or an edge row on a moving object; quality
5, 20-40 frames, 2-4 target frames; a vertex mass of 0.5-1.2 kg (Blender's 0.3 kg under a
bending map). Each hides a stiffness map (structural, every fifth region scene bending) with
a 3-8x contrast, so the best uniform value misses by millimetres: Blender's cloth makes
the targets with it, then the cloth is reset to Blender's defaults (tension = compression =
15, Max 15, bending 0.5, no group), what a user starts from. Per scene (``map_blender``):

1. **regions** (``--regions``; halves, thirds, a band or a disc, hard or soft borders): the
   Weight Map settings ask for the regions and nothing else; the add-on exports the problem
   (``prepare_fit``), the engine fits it (CPU, float64, its defaults: at most 30 steps),
   the add-on writes it back (``write_back``: the regions' values as a vertex group with
   its base and Max) and Blender's cloth replays it. The best uniform value of the same kind
   (tension with compression tied, or bending) is fitted and replayed for contrast.
2. **free** (``--free``; a band, a linear gradient or a bump, structural): the free map
   (one stiffness per vertex, the default smoothness) with at most ``--free-iterations``
   steps, written back and replayed; the correlation of the fitted stiffness per vertex
   with the hidden one; the best uniform value for contrast.
3. **gradient** (``--gradient``; the free scenes' problems): ``map_gradients``.

Everything a scene made stays in ``--out`` (``NAME.blend``, the problem files, the records
written back, the gradient rows), with ``records.json`` and ``summary.json``. A full run
(not ``--quick``, not ``--no-record``) is recorded in ``bench/results/maps.json`` and shown
in ``docs/benchmarks.md``. Needs ``bpy`` (the project's venv).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from map_gradients import DIRECTION_KINDS, check_problem
from map_report import gradient_stats, notes, summarize, table
from map_scenes import (
    GRID_RANGE,
    SUCCESS_RMSE_M,
    MapScene,
    SceneRecord,
    draw_free_scene,
    draw_region_scene,
    group_weights,
)
from results import record as record_results
from robustness_scenes import write_json

QUICK = {"regions": 1, "free": 0, "gradient": 0, "directions": 4, "free_iterations": 30}
MAX_DRAWS = 3  # scenes drawn per scene wanted, at most (those not counted are drawn again)


def say(text: str) -> None:
    print(text, flush=True)


class Run:
    """One benchmark run: its options, the add-on's side, and what it measured so far
    (written to ``--out`` after every scene)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from map_blender import load_map_side  # imports bpy

        self.args = args
        self.side = load_map_side()
        self.fit = self.side.base.fit
        self.records: list[SceneRecord] = []
        self.gradients: dict[str, list[dict[str, Any]]] = {}
        self.generated: dict[str, Any] = {}

    def settings(self, max_iterations: int = 30) -> Any:
        return self.fit.FitSettings(device="cpu", precision="float64", max_iterations=max_iterations)

    def generate(self, scene: MapScene) -> Any:
        from map_blender import generate

        if scene.name not in self.generated:
            self.generated[scene.name] = generate(scene, self.args.out, self.side)
        return self.generated[scene.name]

    def fitted(self, problem_path: Path, settings: Any) -> tuple[Any, Any, float]:
        """(problem, result, seconds) of the fit of a problem file."""
        problem = self.side.base.problem_io.load_problem(problem_path)
        t0 = time.perf_counter()
        result = self.fit.fit(problem, settings)
        return problem, result, time.perf_counter() - t0

    def replayed(
        self, problem_path: Path, prepared: Any, result: Any, blend: Path
    ) -> tuple[float, float, dict]:
        """Write ``result`` back through the add-on and replay it: (RMSE, max error, the record)."""
        from map_blender import replay

        rmse, largest, record = replay(blend, problem_path, prepared, result, self.side)
        write_json(problem_path.with_suffix(".record.json"), record)
        return rmse, largest, record

    def uniform(self, rec: SceneRecord, g: Any) -> None:
        _, result, seconds = self.fitted(g.uniform_problem, self.settings())
        rec.uniform_value = float(result.params[next(iter(result.params))])
        rec.uniform_outcome, rec.uniform_fit_rmse_m = result.outcome, float(result.rmse)
        rec.uniform_fit_s = seconds
        rec.uniform_replay_rmse_m = self.replayed(g.uniform_problem, g.uniform_fit, result, g.blend)[0]

    def replay_map(self, rec: SceneRecord, g: Any, result: Any) -> None:
        rec.replay_rmse_m, rec.replay_max_m, record = self.replayed(g.map_problem, g.map_fit, result, g.blend)
        rec.group = record["maps"][rec.kind]["group"]

    def regions(self, scene: MapScene, rec: SceneRecord) -> None:
        g = self.generate(scene)
        rec.vertices, rec.motion_m = g.vertices, g.motion_m
        problem, result, seconds = self.fitted(g.map_problem, self.settings())
        took(rec, result, seconds)
        entry = result.summary()["maps"][scene.kind]
        rec.fitted = {name: float(r["value"]) for name, r in entry["regions"].items()}
        rec.determined = {name: bool(r["determined"]) for name, r in entry["regions"].items()}
        truth = {f"{scene.kind}:{name}": value for name, value in scene.truth.items()}
        objective = self.fit.FitObjective(problem, self.settings(), [])
        rec.truth_model_rmse_m = float(objective.rmse(truth))
        self.uniform(rec, g)
        self.replay_map(rec, g, result)  # last: a write-back the add-on refuses leaves the rest measured

    def free(self, scene: MapScene, rec: SceneRecord) -> None:
        g = self.generate(scene)
        rec.vertices, rec.motion_m = g.vertices, g.motion_m
        problem, result, seconds = self.fitted(g.map_problem, self.settings(self.args.free_iterations))
        took(rec, result, seconds)
        entry = result.summary()["maps"][scene.kind]
        rec.smoothness = float(entry["smoothness"])
        base, top = result.model_settings.tension_stiffness, result.model_settings.tension_stiffness_max
        fitted = base + result.maps[scene.kind] * (top - base)
        undetermined = np.asarray(entry["undetermined_vertex_indices"], dtype=int)
        kept = np.setdiff1d(np.arange(len(fitted)), undetermined)
        rec.undetermined = len(undetermined)
        rec.fitted = {"low": float(fitted.min()), "high": float(fitted.max())}
        rec.fitted["uniform"] = float(entry["uniform"]["value"])  # the free fit's own start
        if np.ptp(fitted) > 0.0:
            rec.correlation_all = float(np.corrcoef(fitted, g.hidden)[0, 1])
            if len(kept) > 2:
                rec.correlation_determined = float(np.corrcoef(fitted[kept], g.hidden[kept])[0, 1])
        kept_arrays = {"fitted": fitted, "hidden": g.hidden, "undetermined": undetermined}
        np.savez(self.args.out / f"{scene.name}.stiffness.npz", **kept_arrays)
        weights, low, high = group_weights(g.hidden)
        objective = self.fit.FitObjective(problem, self.settings(), [])
        objective.set_maps({scene.kind: weights})
        at_truth = {"tension_stiffness": low, "compression_stiffness": low}
        at_truth.update({"tension_stiffness_max": high, "compression_stiffness_max": high})
        rec.truth_model_rmse_m = float(objective.rmse(at_truth))
        self.uniform(rec, g)
        self.replay_map(rec, g, result)

    def scene(self, scene: MapScene) -> SceneRecord:
        rec = SceneRecord(scene.name, scene.mode, scene.kind, scene.to_dict(), truth=dict(scene.truth))
        t0 = time.perf_counter()
        try:
            (self.regions if scene.mode == "regions" else self.free)(scene, rec)
        except Exception as e:  # one broken scene is a finding, not the end of the run
            traceback.print_exc()
            rec.error = f"{type(e).__name__}: {e}"
        rec.seconds = time.perf_counter() - t0
        uniform = rec.uniform_replay_rmse_m
        rec.counted = uniform is None or uniform > SUCCESS_RMSE_M
        self.records.append(rec)
        self.save()
        say(describe(rec) + ("" if rec.counted else " (not counted: the uniform value matches too)"))
        return rec

    def scenes(self, draw: Callable[[int, int], MapScene], count: int) -> list[MapScene]:
        """Draw and measure scenes until ``count`` are counted (at most ``MAX_DRAWS`` times as
        many drawn); the counted ones."""
        counted: list[MapScene] = []
        k = 0
        while len(counted) < count and k < MAX_DRAWS * count:
            scene = draw(self.args.seed, k)
            k += 1
            # a smoke run takes the smallest sheet (the layout is in units of the side)
            scene = dataclasses.replace(scene, grid=GRID_RANGE[0]) if self.args.quick else scene
            if self.scene(scene).counted:
                counted.append(scene)
        return counted

    def gradient(self, scene: MapScene) -> None:
        t0 = time.perf_counter()
        try:
            g = self.generate(scene)
            problem = self.side.base.problem_io.load_problem(g.map_problem)
            index = int(scene.name.split("_")[-1])
            seed = self.args.seed * 1000 + index
            rows = check_problem(problem, self.fit, self.args.directions, seed, self.args.direction_kind)
        except Exception as e:  # noted, and the other scenes go on
            traceback.print_exc()
            rows = [{"error": f"{type(e).__name__}: {e}"}]
        self.gradients[scene.name] = rows
        write_json(self.args.out / f"{scene.name}.gradient.json", rows)
        self.save()
        stats = gradient_stats(rows)
        say(f"{scene.name} gradient ({time.perf_counter() - t0:.0f} s): {json.dumps(stats)}")

    def save(self) -> None:
        data = {"seed": self.args.seed, "records": [asdict(r) for r in self.records]}
        data["gradients"] = {name: gradient_stats(rows) for name, rows in self.gradients.items()}
        write_json(self.args.out / "records.json", data)


def took(rec: SceneRecord, result: Any, seconds: float) -> None:
    """The fit's own numbers into ``rec``."""
    rec.outcome, rec.outcome_reason = result.outcome, result.outcome_reason
    rec.stop_reason, rec.iterations = result.stop_reason, int(result.iterations)
    rec.fit_rmse_m, rec.fit_s = float(result.rmse), seconds


def describe(rec: SceneRecord) -> str:
    if rec.error:
        fit = f"; the fit: {rec.outcome} ({rec.stop_reason}), RMSE {rec.fit_rmse_m} m" if rec.outcome else ""
        return f"{rec.name}: {rec.error}{fit}"
    fitted = ", ".join(f"{k} {v:.4g}" for k, v in rec.fitted.items())
    truth = ", ".join(f"{k} {v:.4g}" for k, v in rec.truth.items())
    return (
        f"{rec.name} ({rec.kind}, {rec.spec['layout']}, {rec.seconds:.0f} s): truth {truth}; "
        f"fitted {fitted}; "
        f"{rec.outcome} ({rec.stop_reason}), fit {1e3 * rec.fit_rmse_m:.4f} mm, replay "
        f"{1e3 * rec.replay_rmse_m:.4f} mm; uniform {rec.uniform_value:.4g} replays "
        f"{1e3 * rec.uniform_replay_rmse_m:.3f} mm"
    )


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python bench/maps.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder of the scenes, problems and fits")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--regions", type=int, default=None, help="region scenes (default 10)")
    ap.add_argument("--free", type=int, default=None, help="free-map scenes (default 5)")
    ap.add_argument("--gradient", type=int, default=None, help="gradient scenes (default 5)")
    ap.add_argument("--directions", type=int, default=None, help="random directions per point (default 20)")
    ap.add_argument(
        "--direction-kind",
        choices=DIRECTION_KINDS,
        default="signs",
        help="the gradient's directions: a random sign per vertex, or those smoothed as the fit's steps are",
    )
    ap.add_argument("--free-iterations", type=int, default=None, help="most steps of a free map (150)")
    ap.add_argument("--quick", action="store_true", help="a smoke run (one region scene); not recorded")
    ap.add_argument("--no-record", action="store_true", help="do not record into bench/results")
    return ap


def options(argv: list[str] | None) -> argparse.Namespace:
    args = parser().parse_args(argv)
    full = {"regions": 10, "free": 5, "gradient": 5, "directions": 20, "free_iterations": 150}
    for name, value in (QUICK if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    run = Run(args)
    run.scenes(draw_region_scene, args.regions)
    free = run.scenes(draw_free_scene, args.free)
    # the gradient on the counted free scenes' problems, then on further free scenes
    drawn = sum(1 for r in run.records if r.mode == "free")
    extra = [draw_free_scene(args.seed, drawn + k) for k in range(max(0, args.gradient - len(free)))]
    for scene in (free + extra)[: args.gradient]:
        run.gradient(scene)
    seconds = time.perf_counter() - t0
    summary = summarize(run.records, run.gradients, args, seconds)
    write_json(args.out / "summary.json", summary)
    for label, value in summary.items():
        say(f"{label}: {value}")
    if not args.quick and not args.no_record:
        record_results("maps", summary, table(run.records), notes(args), device="CPU, float64")
    return 0


if __name__ == "__main__":
    sys.exit(main())
