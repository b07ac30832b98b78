"""The cantilever rig's bending length against Blender's bending stiffness at two mesh
resolutions: how the bending value must change with the edge length for one fabric.

    python bench/fabric_cantilever.py [--edges 0.005,0.01] [--bendings 0.005,0.01,0.02,0.04]
                                      [--gsm 150] [--width 0.02] [--out result.json]

The vertex mass follows the fabric's weight per area (gsm times the quad's area), so the
same fabric weighs 4 times as much per vertex at twice the edge. The strip is 20 mm wide by
default (a whole number of 5 and 10 mm edges; the standards' 25 mm is not one of 10 mm
edges). As in the standards, each strip is pushed out an edge at a time until its tip line
passes 41.5 deg (from an overhang guessed from the last bending's reading); the reading
nearer 41.5 deg is kept: small angles read badly, the solver's tremble of a few tenths of
a millimetre swamping a tip that barely drops. A power law c = A * bending^k is fitted per
edge length through the kept readings.
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


def reading_row(settings: ClothParams, rig: CantileverRig, device: str) -> dict:
    start = time.perf_counter()
    r = run_cantilever(settings, rig, device=device)
    row = {
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
        f"edge {rig.edge_m * 1e3:4.1f} mm  bending {settings.bending_stiffness:8.4g}  "
        f"overhang {rig.overhang_m * 1e3:4.0f} mm  tip {r.tip_angle_deg:5.1f} deg  "
        f"c {r.bending_length_m * 1e3:6.2f} mm  {'settled' if r.settled else 'NOT settled'} "
        f"at {r.frames} frames",
        flush=True,
    )
    return row


def pushed_out(settings: ClothParams, edge: float, width: float, guess_m: float, device: str) -> list[dict]:
    """Readings an edge apart from an overhang of ``guess_m`` until the tip angle crosses
    41.5 deg (the last two bracket it)."""
    steps = max(1, round(guess_m / edge))
    rows = [reading_row(settings, CantileverRig(width_m=width, edge_m=edge, overhang_m=steps * edge), device)]
    direction = 1 if rows[-1]["tip_angle_deg"] < STANDARD_ANGLE_DEG else -1
    while steps + direction >= 1 and len(rows) < 12:
        steps += direction
        rig = CantileverRig(width_m=width, edge_m=edge, overhang_m=steps * edge)
        rows.append(reading_row(settings, rig, device))
        if (rows[-1]["tip_angle_deg"] < STANDARD_ANGLE_DEG) != (direction == 1):
            break
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", default="0.005,0.01")
    ap.add_argument("--bendings", default="0.005,0.01,0.02,0.04")
    ap.add_argument("--gsm", type=float, default=150.0)
    ap.add_argument("--width", type=float, default=0.02)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    wp.init()
    rows, fits = [], {}
    for edge in floats(args.edges):
        mass = args.gsm * 1e-3 * edge * edge
        kept = []
        guess = 0.04
        for bending in sorted(floats(args.bendings)):
            settings = ClothParams(
                mass=mass, bending_stiffness=bending, bending_stiffness_max=bending, quality=10
            )
            readings = pushed_out(settings, edge, args.width, guess, args.device)
            rows += readings
            best = min(readings, key=lambda row: abs(row["tip_angle_deg"] - STANDARD_ANGLE_DEG))
            kept.append(best)
            # Peirce: c ~ O / 2 at 41.5 deg; the next bending is stiffer
            guess = 2.0 * best["bending_length_m"]
        good = [row for row in kept if row["settled"]]
        if len(good) >= 2:
            log_b = np.log([row["bending_stiffness"] for row in good])
            log_c = np.log([row["bending_length_m"] for row in good])
            k, log_a = np.polyfit(log_b, log_c, 1)
            fits[edge] = {"exponent": float(k), "prefactor_m": float(math.exp(log_a))}
            print(f"edge {edge * 1e3:4.1f} mm: c = {math.exp(log_a) * 1e3:.2f} mm * bending^{k:.3f}")
    edges = sorted(fits)
    if len(edges) >= 2:
        # the bending each resolution needs for a bending length of 25 mm
        needed = {e: (0.025 / fits[e]["prefactor_m"]) ** (1.0 / fits[e]["exponent"]) for e in edges}
        for e in edges:
            print(
                f"for c = 25 mm at {e * 1e3:4.1f} mm edges: bending {needed[e]:.4g} "
                f"({needed[e] / needed[edges[0]]:.3f} x the {edges[0] * 1e3:.1f} mm mesh's)"
            )
        fits["bending_for_25mm"] = {str(e): needed[e] for e in edges}
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps(
                {"args": vars(args), "rows": rows, "fits": {str(k): v for k, v in fits.items()}}, indent=1
            )
        )
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
