"""The cantilever rig's bending length against Blender's bending stiffness at two mesh
resolutions: how the bending value must change with the edge length for one fabric.

    python bench/fabric_cantilever.py [--edges 0.005,0.01] [--bendings 0.005,0.01,0.02,0.04]
                                      [--gsm 150] [--width 0.02] [--blender] [--out result.json]

The vertex mass follows the fabric's weight per area (gsm times the quad's area), so the
same fabric weighs 4 times as much per vertex at twice the edge. The strip is 20 mm wide by
default (a whole number of 5 and 10 mm edges; the standards' 25 mm is not one of 10 mm
edges). As in the standards, each strip is pushed out an edge at a time until its tip line
passes 41.5 deg (from an overhang guessed from the last bending's reading); the reading
nearer 41.5 deg is kept: small angles read badly, the solver's tremble of a few tenths of
a millimetre swamping a tip that barely drops. A power law c = A * bending^k is fitted per
edge length through the kept readings.

``--blender`` runs every step with Blender's own cloth (real bpy, through the Blender
tests' ``fabric_rigs``: the same strip, settings and window rule) as well as with this
project's model, and prints the bending each needs at each resolution side by side: whether
the resolution transfer the model predicts is Blender's. Measured with the defaults (20 mm
strip, 150 g/m^2; about 50 s for both solvers on 2 CPU cores): Blender fits
c = 80.98 mm * bending^0.354 at 5 mm edges and 121.76 mm * bending^0.366 at 10 mm, this
model 84.51 mm * bending^0.365 and 121.13 mm * bending^0.365; for c = 25 mm Blender needs
bending 0.0361 at 5 mm and 0.0132 at 10 mm edges (0.366 times), this model 0.0356 and
0.0132 (0.372 times). On the 26 rigs both solvers ran, their bending lengths are 0.2 %
apart in the median and 2.4 % at most (the softest fabric on a 25 mm overhang, 43.3
against 45.1 deg).
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from warp_core.models.blender_cloth.params import ClothParams  # noqa: E402
from warp_core.rigs import CantileverRig, run_cantilever  # noqa: E402

wp.config.log_level = wp.LOG_WARNING
STANDARD_ANGLE_DEG = 41.5


def floats(text: str) -> list[float]:
    return [float(s) for s in text.split(",")]


def blender_runner():
    """A runner of the rig in Blender's own cloth: imported only when asked for (bpy, the
    isolated test profile of ``blender_env`` set up before bpy loads)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "blender"))
    import blender_env  # noqa: F401  (before bpy: an isolated user profile)
    import fabric_rigs
    from blender_ref import reset_scene

    def run(settings: ClothParams, rig: CantileverRig, device: str):
        reset_scene()  # one strip in the scene at a time: every strip is stepped on frame_set
        theirs = fabric_rigs.ClothParams.from_dict(settings.as_dict())
        return fabric_rigs.run_blender_cantilever(theirs, fabric_rigs.CantileverRig(**vars(rig)))

    return run


RUNNERS = {"ours": lambda settings, rig, device: run_cantilever(settings, rig, device=device)}


def reading_row(settings: ClothParams, rig: CantileverRig, device: str, solver: str = "ours") -> dict:
    start = time.perf_counter()
    r = RUNNERS[solver](settings, rig, device)
    row = {
        "solver": solver,
        "edge_m": rig.edge_m,
        "vertex_mass_kg": settings.mass,
        "bending_stiffness": settings.bending_stiffness,
        "overhang_m": rig.overhang_m,
        "tip_angle_deg": r.tip_angle_deg,
        "bending_length_m": r.bending_length_m,
        "settled": r.settled,
        "frames": r.frames,
        "tip_motion_m": r.tip_motion_m,
        "seconds": time.perf_counter() - start,
    }
    print(
        f"{solver:7s} edge {rig.edge_m * 1e3:4.1f} mm  bending {settings.bending_stiffness:8.4g}  "
        f"overhang {rig.overhang_m * 1e3:4.0f} mm  tip {r.tip_angle_deg:5.1f} deg  "
        f"c {r.bending_length_m * 1e3:6.2f} mm  {'settled' if r.settled else 'NOT settled'} "
        f"at {r.frames} frames",
        flush=True,
    )
    return row


def pushed_out(
    settings: ClothParams, edge: float, width: float, guess_m: float, device: str, solver: str
) -> list[dict]:
    """Readings an edge apart from an overhang of ``guess_m`` until the tip angle crosses
    41.5 deg (the last two bracket it)."""
    steps = max(1, round(guess_m / edge))
    rig = CantileverRig(width_m=width, edge_m=edge, overhang_m=steps * edge)
    rows = [reading_row(settings, rig, device, solver)]
    direction = 1 if rows[-1]["tip_angle_deg"] < STANDARD_ANGLE_DEG else -1
    while steps + direction >= 1 and len(rows) < 12:
        steps += direction
        rig = CantileverRig(width_m=width, edge_m=edge, overhang_m=steps * edge)
        rows.append(reading_row(settings, rig, device, solver))
        if (rows[-1]["tip_angle_deg"] < STANDARD_ANGLE_DEG) != (direction == 1):
            break
    return rows


def power_law(kept: list[dict]) -> dict | None:
    """c = A * bending^k through the settled readings kept (None with fewer than two)."""
    good = [row for row in kept if row["settled"]]
    if len(good) < 2:
        return None
    log_b = np.log([row["bending_stiffness"] for row in good])
    log_c = np.log([row["bending_length_m"] for row in good])
    k, log_a = np.polyfit(log_b, log_c, 1)
    return {"exponent": float(k), "prefactor_m": float(math.exp(log_a))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", default="0.005,0.01")
    ap.add_argument("--bendings", default="0.005,0.01,0.02,0.04")
    ap.add_argument("--gsm", type=float, default=150.0)
    ap.add_argument("--width", type=float, default=0.02)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--blender", action="store_true", help="Blender's own cloth too (needs bpy)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    wp.init()
    solvers = ["ours"]
    if args.blender:
        RUNNERS["blender"] = blender_runner()
        solvers.append("blender")
    rows, fits = [], {solver: {} for solver in solvers}
    for solver in solvers:
        for edge in floats(args.edges):
            mass = args.gsm * 1e-3 * edge * edge
            kept = []
            guess = 0.04
            for bending in sorted(floats(args.bendings)):
                settings = ClothParams(
                    mass=mass, bending_stiffness=bending, bending_stiffness_max=bending, quality=10
                )
                readings = pushed_out(settings, edge, args.width, guess, args.device, solver)
                rows += readings
                best = min(readings, key=lambda row: abs(row["tip_angle_deg"] - STANDARD_ANGLE_DEG))
                kept.append(best)
                # Peirce: c ~ O / 2 at 41.5 deg; the next bending is stiffer
                guess = 2.0 * best["bending_length_m"]
            fit = power_law(kept)
            if fit is not None:
                fits[solver][edge] = fit
                print(
                    f"{solver}: edge {edge * 1e3:4.1f} mm: c = {fit['prefactor_m'] * 1e3:.2f} mm"
                    f" * bending^{fit['exponent']:.3f}"
                )
    for solver in solvers:
        edges = sorted(e for e in fits[solver] if isinstance(e, float))
        if len(edges) < 2:
            continue
        # the bending each resolution needs for a bending length of 25 mm
        fit = fits[solver]
        needed = {e: (0.025 / fit[e]["prefactor_m"]) ** (1.0 / fit[e]["exponent"]) for e in edges}
        for e in edges:
            print(
                f"{solver}: for c = 25 mm at {e * 1e3:4.1f} mm edges: bending {needed[e]:.4g} "
                f"({needed[e] / needed[edges[0]]:.3f} x the {edges[0] * 1e3:.1f} mm mesh's)"
            )
        fit["bending_for_25mm"] = {str(e): needed[e] for e in edges}
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        plain = {solver: {str(k): v for k, v in fit.items()} for solver, fit in fits.items()}
        out.write_text(json.dumps({"args": vars(args), "rows": rows, "fits": plain}, indent=1))
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
