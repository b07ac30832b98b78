"""Many-parameter fits: the stable tape gradient against Levenberg-Marquardt, replayed in Blender.

    python bench/many_parameters.py fit --scenes DIR [--only 0-11] [--optimizers lm,lbfgs] [--jobs 2]
    python bench/many_parameters.py fit --scenes DIR --optimizers lbfgs --label timed \
        --max-iters 1000 --budget-factor 3        # each fit gets 3x the LM fit's time
    python bench/many_parameters.py replay --scenes DIR        # bpy
    python bench/many_parameters.py table --scenes DIR

On the scenes of ``bench/robustness.py generate`` (Blender's own cloth made the targets;
each problem starts from Blender's defaults), every continuous field of Blender's cloth
settings that acts on every cloth is fitted at once, ties off: the four stiffnesses, the
five dampings, mass, pin stiffness and goal friction (12). Mass scales with all forces
(only their ratios move the cloth), and pin stiffness and goal friction do nothing to a
vertex pinned with weight 1 (goal friction starts at 0.1 where Blender's default is 0, since
a fit works on ratios): a 12-parameter fit of these scenes has flat directions, as an
artist's "fit everything" has. Each optimizer fits each scene in its own process, CPU
float64 (``fit``: ``DIR/LABEL/scene_NN.OPTIMIZER.json``, ``--label`` default ``many``);
``replay`` writes the fitted values into the scene's cloth modifier and runs Blender's
cloth (``DIR/LABEL/replays.json``);
``table --columns many/lm,timed/lbfgs`` prints per scene the replay RMSE, the fit's time
and simulations of each, and on how many scenes the second is no worse and within 3x the
first's time.

``--start-jitter 1e-3`` starts every value 0.1 % off (how much a fit's end depends on its
start; ``--jitter-seed K`` draws another such start per scene); ``table --columns
many/lm,cycle/lbfgs,lmjit/lm`` also counts the second column no worse than the worse of the
first and third. ``spread --reference many/lm --draws lmjit/lm,lmj1/lm,... --candidate
timed/lbfgs`` applies "no worse than the reference fit" to other runs of the reference method
itself, and places the candidate among them:

    python bench/many_parameters.py spread --scenes DIR --draws lmjit/lm,lmj1/lm,lmj2/lm \
        --candidate timed/lbfgs

``table`` and ``spread`` record their latest run in ``bench/results/`` (shown in
``docs/benchmarks.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

FIELDS = (
    "tension_stiffness",
    "compression_stiffness",
    "shear_stiffness",
    "bending_stiffness",
    "tension_damping",
    "compression_damping",
    "shear_damping",
    "bending_damping",
    "air_damping",
    "mass",
    "pin_stiffness",
    "goal_friction",
)
GOAL_FRICTION_START = 0.1  # the low end of its plausible range, where Blender's default is 0


from results import record as record_results  # noqa: E402
from robustness import indices  # noqa: E402

TABLE_CELLS = ("replay mm", "model mm", "s", "sims", "outcome")


def fit_one(
    npz: Path,
    optimizer: str,
    out: Path,
    max_iters: int,
    budget_s: float | None = None,
    jitter: float = 0.0,
    jitter_seed: int = 0,
) -> None:
    """One fit in this process: the problem with every field free, the result as JSON.
    With ``jitter``, every start value is first multiplied by exp(jitter * u), u uniform in
    [-1, 1] (seeded by the scene's index, and ``jitter_seed`` where it is not 0): how much
    the result depends on where it starts."""
    import numpy as np

    from warp_core.fit import FitSettings, fit
    from warp_core.fit.problem.files import load_problem

    problem = load_problem(npz)
    start = problem.model_settings
    if start.goal_friction == 0.0:  # Blender's default; a fit works on ratios
        start = start.replace(goal_friction=GOAL_FRICTION_START)
    if jitter:
        index = int(npz.stem.split("_")[-1])
        rng = np.random.default_rng(index if jitter_seed == 0 else (jitter_seed, index))
        factors = np.exp(jitter * rng.uniform(-1.0, 1.0, size=len(FIELDS)))
        moved = {n: float(getattr(start, n) * f) for n, f in zip(FIELDS, factors, strict=True)}
        start = start.replace(**moved)
    problem = replace(problem, model_settings=start, free_parameters=list(FIELDS), ties={}, bounds={})
    settings = FitSettings(optimizer=optimizer, max_iterations=max_iters, time_budget_s=budget_s)
    result = fit(problem, settings)
    summary = result.summary()
    out.write_text(json.dumps({"summary": summary, "params": dict(result.params)}, indent=1))


def run_fits(args: argparse.Namespace) -> None:
    many = args.scenes / args.label
    many.mkdir(exist_ok=True)
    jobs = []
    for npz in sorted(args.scenes.glob("scene_*.npz")):
        index = int(npz.stem.split("_")[-1])
        if args.only is None or index in args.only:
            jobs += [(npz, opt) for opt in args.optimizers.split(",")]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}

    def one(job: tuple[Path, str]) -> str:
        npz, opt = job
        result = many / f"{npz.stem}.{opt}.json"
        result.unlink(missing_ok=True)
        command = [sys.executable, __file__, "one", str(npz), opt, str(result), str(args.max_iters)]
        budget = ""
        if args.budget_factor:  # a multiple of the Levenberg-Marquardt fit's time
            lm = json.loads((args.scenes / args.budget_from / f"{npz.stem}.lm.json").read_text())
            budget = str(args.budget_factor * lm["summary"]["seconds"])
        command += [budget, str(args.start_jitter), str(args.jitter_seed)]
        t0 = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0 or not result.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            result.write_text(json.dumps({"error": tail[0], "wall_s": wall}))
            return f"{npz.stem} {opt}: error {tail[0]}"
        data = json.loads(result.read_text())
        data["wall_s"] = wall
        result.write_text(json.dumps(data, indent=1))
        s = data["summary"]
        return (
            f"{npz.stem} {opt}: {s['outcome']}, model RMSE {1e3 * s['rmse_m']:.3f} mm, "
            f"{s['seconds']:.1f} s, {s['n_forward']} simulations, {s['iterations']} iterations"
        )

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for line in pool.map(one, jobs):
            print(line, flush=True)


def run_replays(args: argparse.Namespace) -> None:
    from robustness_blender import load_addon_side, replay
    from robustness_scenes import load_generated

    side = load_addon_side()
    many = args.scenes / args.label
    path = many / "replays.json"
    replays = json.loads(path.read_text()) if path.exists() else {}
    for scene in load_generated(args.scenes):
        for found in sorted(many.glob(f"{scene.spec.name}.*.json")):
            data = json.loads(found.read_text())
            if "params" not in data:
                continue
            rmse, worst = replay(args.scenes, scene.spec, data["params"], side)
            replays[found.stem] = {"replay_rmse_m": rmse, "replay_max_error_m": worst}
            print(f"{found.stem}: Blender replay RMSE {1e3 * rmse:.3f} mm", flush=True)
            path.write_text(json.dumps(replays, indent=1))


def _column(scenes: Path, column: str) -> dict[str, dict]:
    """One ``LABEL/OPTIMIZER`` column: per scene, the fit's summary with its Blender replay
    (either may be missing: a fit that failed, a replay not run)."""
    label, opt = column.split("/")
    replays = json.loads((scenes / label / "replays.json").read_text())
    entries = {}
    for found in sorted((scenes / label).glob(f"scene_*.{opt}.json")):
        data = json.loads(found.read_text())
        entries[found.stem.split(".")[0]] = {**data.get("summary", {}), **replays.get(found.stem, {})}
    return entries


def _cells(entry: dict) -> list[str]:
    """One column's cells of a scene's row, as TABLE_CELLS names them."""
    e = entry
    return [
        f"{1e3 * e['replay_rmse_m']:.3f}",
        f"{1e3 * e['rmse_m']:.3f}",
        f"{e['seconds']:.1f}",
        str(e["n_forward"]),
        e["outcome"],
    ]


def run_table(args: argparse.Namespace) -> None:
    """Per scene and column (``LABEL/OPTIMIZER``): Blender's replay RMSE, the fit's own
    RMSE, its seconds, simulations and outcome; then how often the second column's replay
    is no worse than the first's and its time within 3x. A third column, the first's fit
    again from a jittered start (``--start-jitter``), also counts how often the second is
    no worse than the worse of those two: within the first's own spread. Recorded as the
    benchmark's latest run (``bench/results/many_parameters.json``)."""
    columns = [c.split("/") for c in args.columns.split(",")]
    rows: dict[str, list[dict]] = {}
    for column in args.columns.split(","):
        for scene, entry in _column(args.scenes, column).items():
            rows.setdefault(scene, []).append(entry)
    print(
        "scene     "
        + "".join(
            f"| {c:>18s}: replay mm  model mm       s  sims    outcome " for c in args.columns.split(",")
        )
    )
    headers = ["scene"] + [f"{c}: {h}" for c in args.columns.split(",") for h in TABLE_CELLS]
    table: list[list[str]] = []
    no_worse = within_time = both = within_spread = 0
    for scene, entries in sorted(rows.items()):
        if len(entries) != len(columns) or not all("replay_rmse_m" in e for e in entries):
            print(f"{scene:10s}| (missing)")
            table.append([scene] + ["-"] * (len(headers) - 1))
            continue
        cells = [
            f"| {1e3 * e['replay_rmse_m']:29.3f} {1e3 * e['rmse_m']:9.3f} {e['seconds']:7.1f} "
            f"{e['n_forward']:5d} {e['outcome']:>10s} "
            for e in entries
        ]
        print(f"{scene:10s}" + "".join(cells))
        table.append([scene] + [v for e in entries for v in _cells(e)])
        if len(entries) >= 2:
            first, second = entries[0], entries[1]
            better = second["replay_rmse_m"] <= first["replay_rmse_m"]
            quick = second["seconds"] <= 3.0 * first["seconds"]
            no_worse, within_time, both = no_worse + better, within_time + quick, both + (better and quick)
        if len(entries) >= 3:
            spread = max(entries[0]["replay_rmse_m"], entries[2]["replay_rmse_m"])
            within_spread += entries[1]["replay_rmse_m"] <= spread
    names = args.columns.split(",")
    seed = json.loads((args.scenes / "scenes.json").read_text()).get("seed")
    summary: dict[str, object] = {"robustness seed": seed, "scenes": len(rows), "columns": args.columns}
    if len(columns) >= 2:
        counts = f"replay no worse {no_worse}, time within 3x {within_time}, both {both}"
        print(f"{columns[1]} against {columns[0]} on {len(rows)} scenes: {counts}")
        summary[f"{names[1]} against {names[0]}"] = counts
    if len(columns) >= 3:
        print(f"{columns[1]} no worse than the worse of {columns[0]} and {columns[2]}: {within_spread}")
        summary[f"{names[1]} no worse than the worse of {names[0]} and {names[2]}"] = within_spread
    record_results("many_parameters", summary, (headers, table))


def at_least(shares: list[float], count: int) -> float:
    """The chance that at least ``count`` of independent events happen, each with its share."""
    ways = [1.0]  # ways[k]: the chance that exactly k have happened so far
    for p in shares:
        ways = [
            (ways[k] if k < len(ways) else 0.0) * (1 - p) + (ways[k - 1] * p if k else 0.0)
            for k in range(len(ways) + 1)
        ]
    return float(sum(ways[count:]))


def run_spread(args: argparse.Namespace) -> None:
    """Item 2's measure applied to the reference method itself: how often another run of it
    (``--draws``: the same fit from starts 0.1 % off, or on another machine) ends with a
    replay no worse than the reference's, and the chance that a method ending like such a
    run is no worse on ``--need`` of the scenes; how often each run is no worse than the
    worst of the others (within the method's own spread); with ``--candidate``, the same
    counts for that column against all of them."""
    columns = [args.reference, *args.draws.split(",")]
    runs = [_column(args.scenes, c) for c in columns]
    candidate = _column(args.scenes, args.candidate) if args.candidate else None
    everyone = runs + ([candidate] if candidate else [])
    scenes = [s for s in sorted(runs[0]) if all("replay_rmse_m" in r.get(s, {}) for r in everyone)]
    names = columns + ([args.candidate] if candidate else [])
    print("replay RMSE, mm (* = not matched)")
    print("scene     " + "".join(f"{n:>14s}" for n in names))
    for s in scenes:
        row = [r[s] for r in runs] + ([candidate[s]] if candidate else [])
        cells = "".join(
            f"{1e3 * e['replay_rmse_m']:13.3f}{'*' if e['outcome'] != 'converged' else ' '}" for e in row
        )
        print(f"{s:10s}{cells}")

    def replay(r: dict[str, dict], s: str) -> float:
        return r[s]["replay_rmse_m"]

    def matched(r: dict[str, dict]) -> int:
        return sum(r[s]["outcome"] == "converged" for s in scenes)

    def in_spread(mine: dict[str, dict], others: list[dict[str, dict]]) -> int:
        return sum(replay(mine, s) <= max(replay(o, s) for o in others) for s in scenes)

    def no_worse(r: dict[str, dict]) -> list[bool]:
        return [replay(r, s) <= replay(runs[0], s) for s in scenes]

    n, draws = len(scenes), [no_worse(d) for d in runs[1:]]
    # per scene, the chance that one more such run is no worse than the reference: Laplace's
    # rule of succession over the draws (a share of 0 or 1 of five draws is no certainty)
    shares = [(sum(scene) + 1) / (len(draws) + 2) for scene in zip(*draws, strict=True)]
    spread = [in_spread(r, runs[:k] + runs[k + 1 :]) for k, r in enumerate(runs)]
    lines = [
        f"matched within the tolerance: {', '.join(str(matched(r)) for r in runs)} (reference first)",
        f"each draw no worse than the reference: {', '.join(str(sum(d)) for d in draws)} of {n}",
        f"chance that one more such run is no worse on >= {args.need} of {n} (Laplace): "
        f"{at_least(shares, args.need):.2g}",
        f"each run no worse than the worst of the {len(runs) - 1} others: "
        f"{', '.join(map(str, spread))} of {n}",
    ]
    if candidate is not None:
        lines.append(
            f"{args.candidate}: matched {matched(candidate)}, no worse than the reference on "
            f"{sum(no_worse(candidate))} of {n}, no worse "
            f"than the worst of the {len(runs)} runs on {in_spread(candidate, runs)}"
        )
    print("\n".join(lines))
    seed = json.loads((args.scenes / "scenes.json").read_text()).get("seed")
    summary: dict[str, object] = {"robustness seed": seed, "scenes": n, "runs": ", ".join(names)}
    summary |= dict(line.split(": ", 1) for line in lines)
    record_results("many_parameters_spread", summary)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["one"]:
        budget = float(argv[5]) if argv[5:6] not in ([], [""]) else None
        jitter = float(argv[6]) if argv[6:] else 0.0
        jitter_seed = int(argv[7]) if argv[7:] else 0
        fit_one(Path(argv[1]), argv[2], Path(argv[3]), int(argv[4]), budget, jitter, jitter_seed)
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["fit", "replay", "table", "spread"])
    ap.add_argument("--scenes", type=Path, required=True, help="a folder of bench/robustness.py generate")
    ap.add_argument("--only", type=indices, default=None, help="scene indices, e.g. 0-11")
    ap.add_argument("--optimizers", default="lm,lbfgs")
    ap.add_argument("--columns", default="many/lm,many/lbfgs", help="table: LABEL/OPTIMIZER, ...")
    ap.add_argument("--max-iters", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--label", default="many", help="the subfolder of --scenes the fits go to")
    ap.add_argument(
        "--budget-factor", type=float, default=0.0, help="time budget: this times the LM fit's seconds"
    )
    ap.add_argument("--budget-from", default="many", help="the subfolder holding those LM fits")
    ap.add_argument(
        "--start-jitter",
        type=float,
        default=0.0,
        help="multiply each start value by exp(J u), u uniform in [-1, 1] seeded by the scene",
    )
    ap.add_argument(
        "--jitter-seed",
        type=int,
        default=0,
        help="another draw of --start-jitter's u per scene (0: the scene's index alone)",
    )
    ap.add_argument("--reference", default="many/lm", help="spread: the reference column")
    ap.add_argument(
        "--draws", default="lmjit/lm", help="spread: other runs of the reference, LABEL/OPTIMIZER, ..."
    )
    ap.add_argument("--candidate", default="", help="spread: a column to place among them")
    ap.add_argument("--need", type=int, default=10, help="spread: scenes no worse that a bar asks for")
    args = ap.parse_args(argv)
    {"fit": run_fits, "replay": run_replays, "table": run_table, "spread": run_spread}[args.phase](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
