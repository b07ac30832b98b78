"""Blender cloth settings from fabric lab numbers, checked by Blender's own cloth: for each
combination of numbers (weight, bending length, drape coefficient, elongation at Kawabata's
500 gf/cm, bias elongation) the fabric fit finds the settings on a mesh of the given edge in
this project's model, then the same rigs built in bpy (cantilever, Cusick drape, tensile
and bias strips) run in Blender 5.0.1's cloth at those settings and read the numbers back.

    .venv/bin/python bench/fabric_lab.py [--only NAME,...] [--out FILE.json]

A combination passes where Blender reads every number the fit reports as matched within
the acceptance (bending length and elongations 5 %, drape coefficient 0.03); one the fit
reports as not matched passes where it names the rig and gives its nearest reading. A drape
can settle with a fold more or less, so each drape is also run by Blender with the rig lifted
1, 2 and 5 micrometres: the spread of those readings is how far Blender's own drape is
repeatable, and the mean of the four is also compared with max(0.03, that spread).
"""

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "blender"), str(ROOT / "bench")]

import blender_env  # noqa: E402,I001  (sets up an isolated Blender profile before bpy)
import bpy  # noqa: E402
from results import record as record_results  # noqa: E402

# name: (weight g/m^2, bending length mm, drape coefficient, elongation %, bias elongation %,
# mesh edge mm); None: not measured. Silk-like to denim-like, spanning the acceptance's
# bending lengths 10-50 mm, drape coefficients 0.2-0.9 and weights 60-400 g/m^2
COMBINATIONS = {
    "chiffon": (60.0, 10.0, 0.25, 5.0, None, 10.0),
    "crepe": (80.0, None, 0.3, 4.0, None, 10.0),
    "lawn": (100.0, 15.0, 0.4, 3.0, 12.0, 10.0),
    "shirting": (130.0, 20.0, 0.5, None, None, 10.0),
    "poplin": (150.0, 25.0, 0.65, 2.5, 8.0, 10.0),
    "twill": (220.0, None, 0.7, 2.0, None, 10.0),
    "suiting": (260.0, 30.0, 0.75, 3.0, None, 10.0),
    "canvas": (350.0, 40.0, 0.85, 1.5, None, 10.0),
    "denim": (400.0, 50.0, 0.9, 1.5, None, 15.0),
    # the same numbers on a coarser mesh: the values each resolution needs, both read back
    "poplin 15 mm": (150.0, 25.0, 0.65, 2.5, 8.0, 15.0),
    "crepe 15 mm": (80.0, None, 0.3, 4.0, None, 15.0),
}
DRAPE_LIFTS_M = (1e-6, 2e-6, 5e-6)
ACCEPTANCE = {
    "bending_length_mm": 0.05,
    "elongation_percent": 0.05,
    "bias_elongation_percent": 0.05,
    "drape_coefficient": 0.03,
}


def blender_reading(
    rigs, strip_rigs, fabric_rigs, result, number: str, shift_m: float = 0.0
) -> tuple[float, bool]:
    """Blender's own cloth on the rig of ``number`` at the fit's settings, as the fit read it
    (``shift_m``: the drape rig lifted, the same problem rounded differently)."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    settings, edge = result.settings, result.edge_m
    n = result.numbers
    if number == "bending_length_mm":
        rig = rigs.fabric.scaled_rig(settings, rigs.fabric_rig(edge, n.bending_length_mm * 1e-3))
        r = fabric_rigs.run_blender_cantilever(settings, rig)
        return r.bending_length_m * 1e3, r.settled
    if number == "drape_coefficient":
        r = fabric_rigs.run_blender_drape(settings, rigs.DrapeRig(edge_m=edge), shift_m)
        return r.coefficient, r.settled
    strip = rigs.StripRig(edge_m=edge, bias=number == "bias_elongation_percent", load_n_per_m=n.load_n_per_m)
    r = strip_rigs.run_blender_strip(settings, strip)
    return r.elongation_percent, r.settled


def record(rows: dict, summary: dict) -> None:
    """The run into ``bench/results/fabric_lab.json`` and the benchmarks page: one table row
    per rig of each combination."""
    headers = [
        "fabric",
        "edge mm",
        "rig",
        "sets",
        "requested",
        "model reads",
        "outcome",
        "Blender reads",
        "Blender lifted 1, 2, 5 um",
    ]
    table = []
    for name, row in rows.items():
        for c in row["rigs"]:
            table.append(
                [
                    name,
                    f"{row['edge_mm']:g}",
                    c["rig"],
                    c["setting"] or "(read only)",
                    f"{c['requested']:g}",
                    f"{c['reading']:.4g}",
                    c["outcome"],
                    f"{c['blender_reading']:.4g}" + ("" if c["within_acceptance"] else " (outside)"),
                    ", ".join(f"{v:.3f}" for v in c.get("blender_lifted", [])[1:]),
                ]
            )
    fit_s = sorted(row["fit_s"] for row in rows.values())
    summary = {
        **summary,
        "fit seconds (median, max)": [round(fit_s[len(fit_s) // 2], 1), round(fit_s[-1], 1)],
    }
    notes = [
        f"{name}: {row['outcome']}; " + ", ".join(f"{k} {v:.4g}" for k, v in row["settings"].items())
        for name, row in rows.items()
    ]
    record_results("fabric_lab", summary, (headers, table), notes)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default=None, help="comma-separated combination names")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    blender_env.import_addon_package().register()
    import fabric_rigs
    import strip_rigs

    rigs = fabric_rigs.rigs
    names = args.only.split(",") if args.only else list(COMBINATIONS)
    rows = {}
    for name in names:
        weight, length, drape, stretch, bias, edge_mm = COMBINATIONS[name]
        numbers = rigs.FabricNumbers(
            weight_gsm=weight,
            bending_length_mm=length,
            drape_coefficient=drape,
            elongation_percent=stretch,
            bias_elongation_percent=bias,
        )
        start = time.perf_counter()
        result = rigs.fit_fabric(numbers, edge_mm * 1e-3)
        fit_s = time.perf_counter() - start
        checks = []
        for r in result.rigs:
            reading, settled = blender_reading(rigs, strip_rigs, fabric_rigs, result, r.number)
            limit = ACCEPTANCE[r.number]
            off = (
                abs(reading - r.requested)
                if r.number == "drape_coefficient"
                else abs(reading / r.requested - 1)
            )
            spread = {}
            if r.number == "drape_coefficient":
                # a drape can settle with a fold more or less: Blender's own readings of the
                # rig lifted by micrometres say how far it is repeatable
                lifted = [reading] + [
                    blender_reading(rigs, strip_rigs, fabric_rigs, result, r.number, shift)[0]
                    for shift in DRAPE_LIFTS_M
                ]
                mean = sum(lifted) / len(lifted)
                spread = {
                    "blender_lifted": lifted,
                    "blender_spread": max(lifted) - min(lifted),
                    "blender_mean_off": abs(mean - r.requested),
                    # the proposed test: the mean of Blender's runs within 0.03 or within
                    # Blender's own spread, whichever is larger
                    "within_spread": abs(mean - r.requested) <= max(limit, max(lifted) - min(lifted)),
                }
            checks.append(
                {
                    **asdict(r),
                    **spread,
                    "blender_reading": reading,
                    "blender_settled": settled,
                    "blender_off": off,
                    "within_acceptance": off <= limit,
                    # a number the fit says it did not match needs no reading within it: the
                    # fit named the rig and its nearest reading
                    "passes": off <= limit if r.outcome == "matched" else True,
                }
            )
        rows[name] = {
            "numbers": asdict(numbers),
            "edge_mm": edge_mm,
            "outcome": result.outcome,
            "settings": {f: getattr(result.settings, f) for f in result.fitted},
            "fit_s": fit_s,
            "rigs": checks,
            "passes": all(c["passes"] for c in checks),
        }
        print(json.dumps({name: rows[name]}, indent=1, default=str), flush=True)
    summary = {
        "combinations": len(rows),
        "all_matched": sum(r["outcome"] == "matched" for r in rows.values()),
        "passing": sum(r["passes"] for r in rows.values()),
        "blender_within_acceptance_where_matched": sum(
            all(c["within_acceptance"] for c in r["rigs"] if c["outcome"] == "matched") for r in rows.values()
        ),
        "matched drapes: Blender's mean within max(0.03, its spread)": sum(
            c.get("within_spread", False)
            for r in rows.values()
            for c in r["rigs"]
            if c["number"] == "drape_coefficient" and c["outcome"] == "matched"
        ),
        "matched drapes": sum(
            c["number"] == "drape_coefficient" and c["outcome"] == "matched"
            for r in rows.values()
            for c in r["rigs"]
        ),
    }
    print(json.dumps(summary, indent=1))
    if not args.only:
        record(rows, summary)
    if args.out:
        out = {"device": "cpu", "precision": "float64", "summary": summary, "combinations": rows}
        args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
