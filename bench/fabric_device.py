"""The fabric fit on one device: each virtual test rig run once at a poplin-like fabric's
settings (10 mm quads), the drape also at four settings in one batch (against one setting's
time: whether the drape search should read several at once there), then whole fits from lab
numbers (``FITS``: a poplin with all five numbers, and fabrics from chiffon to twill with
weight, bending length, drape coefficient and elongation or some of them), one after the
other in one process.

    python bench/fabric_device.py [--device auto|cpu|cuda:0] [--precision float64]
                                  [--fits poplin,chiffon,...] [--out FILE.json]
    python bench/fabric_device.py --record-from FILE.json  (record a run another machine wrote)

Each rig runs once untimed first (kernel loading and graph capture), then timed. The drape
rig drapes its specimen from four lifted starts: one batch on a GPU, side by side on a CPU.
``--device auto`` (the fabric fit's default) runs each rig where a fit of its size runs
fastest (``warp_core.devices``); each rig's device is recorded.
"""

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import warp as wp  # noqa: E402
from results import record as record_results  # noqa: E402

from warp_core.devices import placed_device  # noqa: E402
from warp_core.models.blender_cloth.params import ClothParams  # noqa: E402
from warp_core.rigs import (  # noqa: E402
    DrapeRig,
    FabricNumbers,
    StripRig,
    fabric_rig,
    fit_fabric,
    run_cantilever,
    run_drape,
    run_drapes,
    run_strip,
    vertex_mass,
)
from warp_core.rigs.cantilever import cantilever_strip  # noqa: E402
from warp_core.rigs.drape import drape_specimen  # noqa: E402
from warp_core.rigs.tensile import strip_mesh  # noqa: E402

EDGE_M = 0.01
NUMBERS = FabricNumbers(150.0, 25.0, 0.65, elongation_percent=2.5, bias_elongation_percent=8.0)
# whole fits: weight g/m^2, bending length mm, drape coefficient, elongation % (500 gf/cm)
FITS = {
    "poplin": NUMBERS,
    "chiffon": FabricNumbers(60.0, 10.0, 0.25, elongation_percent=5.0),
    "shirting": FabricNumbers(130.0, 20.0, 0.5),
    "twill": FabricNumbers(220.0, None, 0.7, elongation_percent=2.0),
    # the four numbers of chiffon's kind, heavier: the drape unreachable, read to the shear's floor
    "suiting": FabricNumbers(260.0, 30.0, 0.75, elongation_percent=3.0),
    "canvas": FabricNumbers(350.0, 40.0, 0.85, elongation_percent=1.5),
}
# about what the fit finds for NUMBERS (tension, shear, bending)
SETTINGS = ClothParams(quality=10).replace(
    mass=vertex_mass(150.0, EDGE_M),
    tension_stiffness=0.17,
    compression_stiffness=0.17,
    shear_stiffness=0.03,
    bending_stiffness=0.011,
    bending_stiffness_max=0.011,
)


def timed(run, *args) -> tuple[float, object]:
    run(*args)  # loads and captures
    wp.synchronize()
    start = time.perf_counter()
    reading = run(*args)
    wp.synchronize()
    return time.perf_counter() - start, reading


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="float64", choices=["float32", "float64"])
    parser.add_argument("--fits", default=",".join(FITS), help="whole fits to run, of: " + ", ".join(FITS))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--record-from", type=Path, help="record the run a --out file holds, and stop")
    args = parser.parse_args()
    if args.record_from is not None:
        record(json.loads(args.record_from.read_text()))
        return 0
    wp.config.quiet = True
    cantilever, tensile, bias = (
        fabric_rig(EDGE_M, 0.025),
        StripRig(edge_m=EDGE_M),
        StripRig(edge_m=EDGE_M, bias=True),
    )
    drape = DrapeRig(edge_m=EDGE_M)
    rigs = {  # each with its specimen's mesh
        "cantilever": (run_cantilever, cantilever, cantilever_strip(cantilever)[0]),
        "tensile": (run_strip, tensile, strip_mesh(tensile)[0]),
        "bias": (run_strip, bias, strip_mesh(bias)[0]),
        "drape": (run_drape, drape, drape_specimen(drape)),
    }
    command = " ".join(["python", "bench/fabric_device.py", *sys.argv[1:]])
    out: dict = {"device": args.device, "precision": args.precision, "command": command, "rig_runs": {}}
    for name, (runner, rig, mesh) in rigs.items():
        on = placed_device(args.device, mesh.vertex_count, args.precision).device
        seconds, reading = timed(runner, SETTINGS, rig, on, args.precision)
        out["rig_runs"][name] = {"seconds": seconds, "frames": reading.frames, "device": on}
        if on.startswith("cuda"):
            out["device_name"] = wp.get_device(on).name
        print(f"{name}: {seconds:.2f} s on {on}, {reading.frames} frames", flush=True)
    drape_at = placed_device(args.device, rigs["drape"][2].vertex_count, args.precision).device
    shears = [SETTINGS.replace(shear_stiffness=v, shear_stiffness_max=v) for v in (0.03, 0.01, 3e-3, 1e-3)]
    seconds, readings = timed(run_drapes, shears, drape, drape_at, args.precision)
    out["rig_runs"]["drape x4 settings"] = {
        "seconds": seconds,
        "frames": max(r.frames for r in readings),
        "device": drape_at,
    }
    print(f"drape at 4 settings: {seconds:.2f} s on {drape_at}", flush=True)
    out["fits"] = {}
    for name in filter(None, args.fits.split(",")):
        numbers = FITS[name]
        start = time.perf_counter()
        result = fit_fabric(numbers, EDGE_M, device=args.device, precision=args.precision)
        out["fits"][name] = {
            "numbers": numbers.__dict__,
            "seconds": time.perf_counter() - start,
            "outcome": result.outcome,
            "devices": result.device,
            "settings": {f: getattr(result.settings, f) for f in result.fitted},
            "rigs": [
                {
                    "rig": r.rig,
                    "requested": r.requested,
                    "reading": r.reading,
                    "outcome": r.outcome,
                    "runs": r.runs,
                    "seconds": r.seconds,
                }
                for r in result.rigs
            ],
        }
        print(name, json.dumps(out["fits"][name]), flush=True)
        if args.out:  # after each fit: a run cut short keeps the fits it finished
            args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def record(out: dict) -> None:
    """A run's figures into ``bench/results/fabric_device.json`` and the benchmarks page."""
    fits = out["fits"]
    summary = {"device": out["device"], "precision": out["precision"]}
    summary |= {f"{name} fit seconds": round(fit["seconds"], 1) for name, fit in fits.items()}
    summary |= {f"{name} run seconds": round(r["seconds"], 2) for name, r in out["rig_runs"].items()}
    headers = ["fabric", "seconds", "outcome", "rig", "requested", "reading", "rig outcome", "runs", "rig s"]
    rows = []
    for name, fit in fits.items():
        for k, r in enumerate(fit["rigs"]):
            head = [name, f"{fit['seconds']:.1f}", fit["outcome"]] if k == 0 else ["", "", ""]
            rows.append(
                head
                + [
                    r["rig"],
                    f"{r['requested']:g}",
                    f"{r['reading']:.4g}",
                    r["outcome"],
                    str(r["runs"]),
                    f"{r['seconds']:.1f}",
                ]
            )
    device = f"{out['device']}, {out['device_name']}" if "device_name" in out else ""
    notes = [f"measured by: {out['command']}"]
    notes += [f"{name}: {FITS[name]}; rigs on {fit['devices']}" for name, fit in fits.items()]
    record_results("fabric_device", summary, (headers, rows), notes, device=device)


if __name__ == "__main__":
    sys.exit(main())
