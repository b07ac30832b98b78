"""How well the tape gradient points downhill on Blender-made scenes.

    python bench/gradients.py --scenes DIR [--starts 2] [--seed 1] [--out FILE.json]

For every problem file ``DIR/scene_NN.npz`` written by ``bench/robustness.py generate``
(Blender's own cloth made the targets; the problem starts from Blender's defaults), at the
problem's start and at ``--starts`` random starts (each free parameter drawn log-uniform
in its plausible range, seeded), it compares per free parameter (tied ones moved together):

* each tape gradient of ``--kinds`` (default ``exact,stable``; ``implicit`` too):
  d loss / d log value (``FitObjective.gradient``), loss 0.5 |r|^2;
* ``slope``: the central difference of the loss over +-1 % in log value, with the CG
  iteration counts of the base point repeated (``Rollout.frozen``): the slope an optimizer
  steps along.

It prints one line per parameter and, per kind, the statistics the gradient is judged by:
the share with the slope's sign, the share within a factor of 2 of it (a non-finite
gradient counts as neither), and how many are non-finite. CPU, float64; no bpy.
``--pick 3,8`` runs only those scenes with the random starts of a full run.

Measured with the smoothing (``tangents.smoothed_where_chaotic``), robustness seed 21, made
after the last change to the gradient, 40 scenes x (defaults + 2 random starts), 390
parameters, sign / within 2x / non-finite: exact 81.3 % / 58.2 % / 0, stable 94.9 % / 87.9 %
/ 0 (scenes 0-19: 95.3 % / 88.0 %; 20-39: 94.4 % / 87.9 %); 24 stable entries smoothed, the
tape's own 366: 95.6 % / 89.3 %; where the slope is determined (374): 96.5 % / 91.4 %
(713 s on a 2-core CPU). Seed 23, 20 scenes made after that run (186 parameters): exact
81.7 % / 60.8 % / 0, stable 96.8 % / 89.2 % / 0; 7 smoothed, the tape's own 96.6 % / 90.5 %;
determined (179): 97.2 % / 91.6 % (716 s).

Before the smoothing, 20 scenes x (defaults + 2 random starts):

    robustness seed 10 (198 parameters): exact 86 % / 69 % / 0, implicit 94 % / 80 % / 0,
        stable 96 % / 91 % / 0 (319 s)
    robustness seed 13 (189 parameters, not looked at while choosing the guard factor):
        exact 75 % / 53 % / 0, stable 93 % / 84 % / 0 (389 s)

All 40 scenes of each seed, stable only, before the smoothing:
    seed 10 (375 parameters): 95 % / 89 % / 0 (328 s); seed 13 (381): 94 % / 86 % / 0 (375 s)

Tried before and dropped: an adjoint shrunk per substep to a horizon of 2 or 8 frames
(reached 1e9 and 1e17 on an exploding scene and came out 5-50x too small where the exact
gradient was right), the adjoint's growth clipped per substep to 1.0x or 1.2x (within 2x:
2 % and 11 %), the stable reverse's (x, v) adjoint capped at 2x or 8x its incoming norm per
substep, after the guard's choice, so that only runs where both reverses explode are touched
(40 scenes, seed 10: 95 % / 88 % and 95 % / 89 % against 95 % / 89 % without; seed 13 at 2x:
94 % / 84 % against 94 % / 86 %), the CG differentiated with its step lengths held constant (seed 10's first
three scenes: sign 75 %, within 2x 46 %, against the implicit reverse's 88 % and 75 %).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from slope_agreement import agreement

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warp_core.fit import FitSettings  # noqa: E402
from warp_core.fit.objective.objective import FitObjective  # noqa: E402
from warp_core.fit.problem.files import load_problem  # noqa: E402
from warp_core.fit.problem.spec import parameter_spec  # noqa: E402
from warp_core.models import get_model  # noqa: E402

STEP = 0.01  # +-1 % in log value


def random_start(spec, problem, rng: np.random.Generator) -> dict[str, float]:
    params = {p.name: p for p in get_model(problem.model).parameters}
    values = spec.initial_values()
    for k, name in enumerate(spec.free_names):
        lo, hi = params[name].plausible_range()
        v = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        for member in spec.group(k):
            values[member] = v
    return values


def slope(objective: FitObjective, values: dict[str, float], group: list[str], frozen) -> float:
    """Central difference of the loss over +-STEP in the log value of ``group``."""
    sides = []
    for sign in (1.0, -1.0):
        moved = dict(values)
        for n in group:
            moved[n] = values[n] * math.exp(sign * STEP)
        x, _ = objective.positions(moved, frozen=frozen)
        r = objective.residuals_at(x)
        sides.append(0.5 * float(r @ r))
    return (sides[0] - sides[1]) / (2.0 * STEP)


def compare(objective: FitObjective, spec, values: dict[str, float], kinds: list[str]) -> list[dict]:
    """The tape's gradients of ``kinds`` and the +-1 % slope of the loss per free parameter
    at ``values``; ``twin``: the same slope from values one unit in the last place higher."""
    grads = {}
    smoothed: tuple[str, ...] = ()
    for kind in kinds:
        loss, grads[kind] = objective.gradient(values, kind=kind)
        if kind == "stable":
            smoothed = objective.smoothed_last
    _, frozen = objective.positions(values)
    rows = []
    for k in range(spec.n_free):
        group = spec.group(k)
        nudged = dict(values)
        for n in group:
            nudged[n] = float(np.nextafter(values[n], math.inf))
        row = {
            "name": spec.free_names[k],
            "value": values[spec.free_names[k]],
            "loss": loss,
            "slope": slope(objective, values, group, frozen),
            "twin": slope(objective, nudged, group, frozen),
            # the stable entry is the loss's slope over the tangent step (+-1 % in float64:
            # the reference itself), not the tape's
            "smoothed": spec.free_names[k] in smoothed,
        }
        for kind, grad in grads.items():  # d loss / d log value of the group
            row[kind] = sum(grad[n] * values[n] for n in group)
        rows.append(row)
    return rows


def judge(rows: list[dict], kind: str) -> dict:
    """Share of parameters whose ``kind`` gradient has the slope's sign, and is within 2x;
    a non-finite gradient counts as wrong. For ``stable`` also: how many entries were
    smoothed, and the shares over the others (what the tape alone got right)."""
    shares, signed, same_sign, within = agreement(rows, kind)
    out = {"parameters": len(rows), **shares}
    if kind == "stable":
        tape = [r for r in signed if not r.get("smoothed")]
        out["smoothed"] = sum(1 for r in rows if r.get("smoothed"))
        out["sign_tape"] = sum(1 for r in same_sign if not r.get("smoothed")) / max(len(tape), 1)
        out["within_2x_tape"] = sum(1 for r in within if not r.get("smoothed")) / max(len(tape), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", required=True, type=Path, help="a folder of bench/robustness.py")
    ap.add_argument("--starts", type=int, default=2, help="random starts per scene besides the problem's")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="at most this many scenes (0: all)")
    ap.add_argument(
        "--pick", type=str, default="", help="only these scene numbers, e.g. 3,8 (same random starts)"
    )
    ap.add_argument(
        "--kinds", default="exact,stable", help="tape gradients to compare (exact, stable, implicit)"
    )
    ap.add_argument("--out", type=Path, help="write every row and the statistics as JSON")
    args = ap.parse_args(argv)
    files = sorted(args.scenes.glob("scene_*.npz"))[: args.limit or None]
    if not files:
        print(f"no scene_*.npz in {args.scenes}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    kinds = args.kinds.split(",")
    rows: list[dict] = []
    t0 = time.perf_counter()
    for path in files:
        problem = load_problem(path)
        spec = parameter_spec(problem)
        objective = FitObjective(problem, FitSettings(), spec.names, spec=spec)
        starts = [("defaults", spec.initial_values())]
        starts += [(f"random{k + 1}", random_start(spec, problem, rng)) for k in range(args.starts)]
        if args.pick and int(path.stem.split("_")[-1]) not in {int(k) for k in args.pick.split(",")}:
            continue  # its random starts are drawn all the same, so the others' stay put
        for label, values in starts:
            try:
                found = compare(objective, spec, values, kinds)
            except (FloatingPointError, ValueError) as e:
                print(f"{path.stem} {label}: {e}")
                continue
            for row in found:
                row.update(scene=path.stem, start=label)
                tape = "  ".join(f"{kind} {row[kind]: .3e}" for kind in kinds)
                tape += " (smoothed)" if row["smoothed"] else ""
                print(
                    f"{path.stem} {label:9s} {row['name']:22s} slope {row['slope']: .3e} "
                    f"(twin {row['twin']: .3e})  {tape}",
                    flush=True,
                )
            rows += found
    stats = {kind: judge(rows, kind) for kind in kinds}
    stats["seconds"] = time.perf_counter() - t0
    for kind in kinds:
        s = stats[kind]
        print(
            f"{kind}: {s['parameters']} parameters, sign of the slope {100 * s['sign']:.1f} %, within 2x "
            f"{100 * s['within_2x']:.1f} %, non-finite {s['non_finite']}; where the slope is determined "
            f"({s['determined']}): {100 * s['sign_determined']:.1f} % / "
            f"{100 * s['within_2x_determined']:.1f} %"
        )
        if "smoothed" in s:
            print(
                f"  {s['smoothed']} entries smoothed (the slope over the tangent step); the tape's "
                f"own entries: sign {100 * s['sign_tape']:.1f} %, within 2x {100 * s['within_2x_tape']:.1f} %"
            )
    print(f"({stats['seconds']:.0f} s)")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "stats": stats}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
