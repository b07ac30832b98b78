"""Build the built-in material presets in ``assets/presets/``.

    python bench/fit_presets.py blender            # Blender's five cloth presets, read with ast
    python bench/fit_presets.py fit [NAME ...]     # fit the added materials (all, or the named ones)
    python bench/fit_presets.py table              # the README table from the stored presets

``blender`` reads Blender's own ``presets/cloth/*.py`` files of the installed ``bpy`` module
statically (never runs them) and writes the fields our ``blender_cloth`` model knows.

``fit`` makes each added material's preset with this engine: a reference parameter set for
the fabric (Blender's Cotton preset scaled by the fabric's measured-property ratios to a
150 g/m² cotton shirting) is simulated on the drape test below (quality 5); then
``warp_core.fit.fit`` starts from Blender's Cotton values (mass set from the fabric's areal
density, which is measured rather than fitted: a sheet under gravity drapes the same when
mass, stiffness and damping scale together) and fits tension (compression tied), shear,
bending and damping (compression and shear damping tied). The preset holds the fitted
values, with the fit's RMSE and the reference values in its provenance: how closely the
drape test recovers each parameter shows which ones it determines. Slow (minutes per
material on a CPU): not part of the test suite.

Drape test ``two-panel-16`` (both panels in one simulation, no collisions):
  * two 1 m x 1 m sheets of 16 x 16 vertices (15 x 15 quads), horizontal at z = 0, 1.5 m apart;
  * panel A clamped: the two vertex rows at its -y edge pinned (a cantilever; bending
    shows in the curl at the clamp and in the swing);
  * panel B pinned at its two +y corners only (stretch and shear show in the sag and
    the diagonal folds);
  * quality 5, gravity -9.81 (Blender's default scene), start frame 1, targets at frames
    11, 21, 31, 41, 51 and 61 (vertex positions of both panels).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from warp_core.fit import FitProblem, FitSettings, Target, fit  # noqa: E402
from warp_core.mesh import ClothMesh, grid_mesh  # noqa: E402
from warp_core.models.blender_cloth.params import ClothParams  # noqa: E402
from warp_core.models.blender_cloth.simulator import ClothSimulator  # noqa: E402
from warp_core.presets import (  # noqa: E402
    BUILTIN_DIR,
    Preset,
    list_presets,
    load_preset_file,
    preset_to_json,
    safe_filename,
)

BLENDER_PRESETS = ("Cotton", "Denim", "Leather", "Rubber", "Silk")

DRAPE_TEST = "two-panel-16"
DRAPE_TEST_TEXT = (
    "two-panel-16: two 1 m sheets, 16x16 vertices, horizontal; one clamped on an edge (2 pinned rows), "
    "one pinned at 2 corners; quality 5; gravity -9.81; frames 1-61; targets at 11, 21, 31, 41, 51, 61"
)
GRID = 16
TARGET_FRAMES = (11, 21, 31, 41, 51, 61)
PRESET_QUALITY = 5
COTTON_AREAL_DENSITY = 150.0  # g/m², the fabric Blender's Cotton preset stands for here
FITTED = ["tension_stiffness", "shear_stiffness", "bending_stiffness", "tension_damping"]
TIES = {
    "compression_stiffness": "tension_stiffness",
    "compression_damping": "tension_damping",
    "shear_damping": "tension_damping",
}

# Representative fabric properties, as ratios to a 150 g/m² cotton shirting (Blender's
# Cotton preset): tensile stiffness, in-plane shear rigidity, bending rigidity, and
# internal damping. Typical magnitudes of published fabric measurements (KES-F style),
# not the measurement of one particular fabric.
MATERIALS: dict[str, dict] = {
    "Jersey Knit": {
        "areal_density": 180.0,
        "tension": 0.2,
        "shear": 0.3,
        "bending": 0.4,
        "damping": 1.0,
        "notes": "Single jersey cotton knit, 180 g/m²: loops make it about 5x stretchier than woven "
        "cotton and soft in shear and bending.",
    },
    "Linen": {
        "areal_density": 200.0,
        "tension": 2.0,
        "shear": 1.0,
        "bending": 3.0,
        "damping": 1.5,
        "notes": "Mid-weight linen, 200 g/m²: flax fibres are stiffer than cotton in tension and "
        "bending; crisp, slow folds.",
    },
    "Canvas": {
        "areal_density": 400.0,
        "tension": 4.0,
        "shear": 3.0,
        "bending": 40.0,
        "damping": 3.0,
        "notes": "Cotton duck canvas, 400 g/m²: dense heavy weave, stiff in tension, shear and "
        "bending; holds broad folds.",
    },
    "Wool Felt": {
        "areal_density": 350.0,
        "tension": 1.0,
        "shear": 1.0,
        "bending": 25.0,
        "damping": 5.0,
        "notes": "Pressed wool felt, 3 mm, 350 g/m²: non-woven, as stiff in shear as in tension, "
        "thick hence stiff in bending, strongly damped (no flutter).",
    },
    "PVC": {
        "areal_density": 380.0,
        "tension": 2.0,
        "shear": 2.0,
        "bending": 8.0,
        "damping": 0.6,
        "notes": "Plasticised PVC film (vinyl), 0.3 mm, 380 g/m²: isotropic sheet, shear like "
        "tension, springy with little internal damping.",
    },
}


def addon_version() -> str:
    return tomllib.loads((REPO / "blender_manifest.toml").read_text())["version"]


# ---------------------------------------------------------------------------- Blender's presets


def blender_preset_files() -> dict[str, Path]:
    import bpy  # only here: the fit needs no Blender

    out = {}
    for directory in bpy.utils.preset_paths("cloth"):
        for name in BLENDER_PRESETS:
            path = Path(directory) / f"{name}.py"
            if path.is_file():
                out.setdefault(name, path)
    missing = [n for n in BLENDER_PRESETS if n not in out]
    if missing:
        raise SystemExit(f"Blender's cloth presets not found: {', '.join(missing)}")
    return out


def addon_presets():
    """The add-on's presets module (it reads Blender's ``.py`` presets), with this checkout
    imported as the extension package so its relative imports resolve."""
    import importlib
    import importlib.util

    if "fit_to_target" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "fit_to_target", REPO / "__init__.py", submodule_search_locations=[str(REPO)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules["fit_to_target"] = package
        spec.loader.exec_module(package)
    return importlib.import_module("fit_to_target.addon.presets")


def write_blender_presets() -> None:
    import bpy

    presets = addon_presets()
    version = ".".join(str(v) for v in bpy.app.version[:2])
    for name, path in blender_preset_files().items():
        settings = presets.read_blender_cloth_preset(path)
        values = presets.blender_preset_values(settings)
        preset = Preset(
            name=name,
            values=values,
            notes=f"Blender's own {name} cloth preset (presets/cloth/{name}.py of Blender {version}), "
            "the fields of it this model knows; internal springs and pressure, which it turns off, "
            "are left alone.",
        )
        out = BUILTIN_DIR / safe_filename(name)
        out.write_text(preset_to_json(preset), encoding="utf-8")
        print(f"{out.relative_to(REPO)}: {values}")


# ---------------------------------------------------------------------------- fitted presets


def drape_test_mesh(n: int = GRID) -> ClothMesh:
    """The two panels of the drape test, with their pins."""
    sheet = grid_mesh(n, n)
    a = sheet.vertices.copy()
    b = sheet.vertices.copy()
    b[:, 0] += 1.5
    spacing = 1.0 / (n - 1)
    clamped = a[:, 1] < -0.5 + 1.5 * spacing
    corners = (sheet.vertices[:, 1] > 0.5 - 0.5 * spacing) & (
        np.abs(np.abs(sheet.vertices[:, 0]) - 0.5) < 0.5 * spacing
    )
    polygons = [p.tolist() for p in sheet.polygons()]
    polygons += [[i + n * n for i in p] for p in sheet.polygons()]
    pins = np.concatenate([clamped, corners]).astype(np.float64)
    return ClothMesh.from_polygons(np.vstack([a, b]), polygons, pin_weights=pins)


def cotton_values() -> dict[str, float]:
    return dict(load_preset_file(BUILTIN_DIR / "cotton.json", builtin=True).values)


def reference_values(material: dict) -> dict[str, float]:
    """Blender's Cotton scaled by the fabric's property ratios."""
    c = cotton_values()
    return {
        "mass": round(c["mass"] * material["areal_density"] / COTTON_AREAL_DENSITY, 6),
        "tension_stiffness": c["tension_stiffness"] * material["tension"],
        "compression_stiffness": c["compression_stiffness"] * material["tension"],
        "shear_stiffness": c["shear_stiffness"] * material["shear"],
        "bending_stiffness": c["bending_stiffness"] * material["bending"],
        "tension_damping": c["tension_damping"] * material["damping"],
        "compression_damping": c["compression_damping"] * material["damping"],
        "shear_damping": c["shear_damping"] * material["damping"],
        "air_damping": c["air_damping"],
        "bending_damping": ClothParams().bending_damping,
    }


def fit_material(name: str, device: str, max_iterations: int) -> Preset:
    material = MATERIALS[name]
    mesh = drape_test_mesh()
    reference = reference_values(material)
    ref_params = ClothParams(quality=PRESET_QUALITY).replace(**reference)
    sim = ClothSimulator(mesh, ref_params, device=device, precision="float64")
    positions = sim.simulate(max(TARGET_FRAMES), list(TARGET_FRAMES))
    targets = [Target(frame=f, positions=positions[k]) for k, f in enumerate(TARGET_FRAMES)]

    cotton = cotton_values()
    start = {k: v for k, v in cotton.items() if k != "quality"}
    start["mass"] = reference["mass"]  # the areal density is measured, not fitted
    start["bending_damping"] = reference["bending_damping"]
    start_params = ClothParams(quality=PRESET_QUALITY).replace(**start)
    problem = FitProblem(
        mesh=mesh, model_settings=start_params, targets=targets, free_parameters=list(FITTED), ties=dict(TIES)
    )

    def progress(iteration: int, loss: float, values: dict[str, float]) -> None:
        shown = ", ".join(f"{k}={values[k]:.4g}" for k in FITTED)
        print(f"  [{name}] iteration {iteration:2d}  loss {loss:.4e}  {shown}", flush=True)

    settings = FitSettings(device=device, max_iterations=max_iterations, precision="float64")
    result = fit(problem, settings, progress=progress)
    for w in result.warnings:
        print(f"  [{name}] warning: {w}")

    values: dict[str, float] = {"quality": PRESET_QUALITY}
    for key in ("mass", *TIES, *FITTED, "air_damping", "bending_damping"):
        values[key] = float(getattr(result.model_settings, key))
    values = {k: (v if k == "quality" else float(f"{v:.6g}")) for k, v in values.items()}
    notes = (
        f"{material['notes']} Fitted by Fit to Target ({DRAPE_TEST} drape test, quality {PRESET_QUALITY}, "
        f"mass from the areal density). Like Blender's presets, mass is per vertex and stiffness per "
        f"mean edge length of a 16x16-vertex 1 m sheet."
    )
    provenance = {
        "drape_test": DRAPE_TEST_TEXT,
        "target_frames": list(TARGET_FRAMES),
        "fit_rmse_m": float(f"{result.rmse:.4g}"),
        "fit_max_error_m": float(f"{result.max_error:.4g}"),
        "fit_seconds": round(result.seconds, 1),
        "date": dt.date.today().isoformat(),
        "addon_version": addon_version(),
        "device": result.device,
        "start": "Cotton (mass from the areal density)",
        "fit_parameters": list(FITTED),
        "reference_values": {k: float(f"{v:.6g}") for k, v in reference.items()},
    }
    preset = Preset(name=name, values=values, notes=notes, provenance=provenance)
    print(
        f"  [{name}] rmse {result.rmse * 1000:.2f} mm (start {result.initial_rmse * 1000:.1f} mm), "
        f"max {result.max_error * 1000:.2f} mm, {result.iterations} iterations, {result.seconds:.0f} s, "
        f"{result.stop_reason}",
        flush=True,
    )
    return preset


def write_fitted(names: list[str], device: str, max_iterations: int) -> None:
    for name in names:
        if name not in MATERIALS:
            raise SystemExit(f"unknown material {name!r}; choose from {', '.join(MATERIALS)}")
    for name in names:
        preset = fit_material(name, device, max_iterations)
        out = BUILTIN_DIR / safe_filename(name)
        out.write_text(preset_to_json(preset), encoding="utf-8")
        print(f"wrote {out.relative_to(REPO)}")


def _length(metres: float) -> str:
    if metres == 0.0:
        return "0"
    if metres >= 1e-3:
        return f"{metres * 1e3:.1f} mm"
    if metres >= 1e-6:
        return f"{metres * 1e6:.1f} µm"
    return f"{metres:.0e} m"


def drape_rmse(preset: Preset) -> tuple[float, float]:
    """RMSE on the preset's drape test, recomputed by simulation: of the fit's start (Cotton with
    the preset's mass) and of the stored (rounded) preset values."""
    mesh = drape_test_mesh()
    frames = list(preset.provenance["target_frames"])
    reference = ClothParams(quality=PRESET_QUALITY).replace(**preset.provenance["reference_values"])
    target = ClothSimulator(mesh, reference, precision="float64").simulate(max(frames), frames)
    start = {k: v for k, v in cotton_values().items() if k != "quality"}
    start.update(mass=preset.values["mass"], bending_damping=preset.values["bending_damping"])
    out = []
    for values in (start, preset.parameters):
        sim = ClothSimulator(mesh, ClothParams(quality=PRESET_QUALITY).replace(**values), precision="float64")
        x = sim.simulate(max(frames), frames)
        out.append(float(np.sqrt(np.mean(np.sum((x - target) ** 2, axis=-1)))))
    return out[0], out[1]


def print_table() -> None:
    """Markdown table of the fitted built-ins (start and stored-value RMSE recomputed by simulation)."""
    rows = [p for p in list_presets(BUILTIN_DIR, None) if p.provenance.get("drape_test")]
    keys = ["mass", "tension_stiffness", "shear_stiffness", "bending_stiffness", "tension_damping"]
    head = ["Material", "mass", "tension = compression", "shear", "bending", "damping (t = c = s)"]
    head += ["RMSE at start (Cotton)", "fit RMSE", "fit max error", "RMSE of stored values", "fit time"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for p in rows:
        ref = p.provenance["reference_values"]
        cells = [p.name] + [f"{p.values[k]:g}" + ("" if k == "mass" else f" ({ref[k]:g})") for k in keys]
        prov = p.provenance
        start, stored = drape_rmse(p)
        cells += [
            _length(start),
            _length(prov["fit_rmse_m"]),
            _length(prov["fit_max_error_m"]),
            _length(stored),
            f"{prov['fit_seconds']:.0f} s",
        ]
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("blender", help="write Blender's five cloth presets")
    p_fit = sub.add_parser("fit", help="fit the added materials")
    p_fit.add_argument("names", nargs="*", help=f"materials (default all: {', '.join(MATERIALS)})")
    p_fit.add_argument("--device", default="cpu")
    p_fit.add_argument("--max-iterations", type=int, default=25)
    sub.add_parser("table", help="print the README table")
    args = parser.parse_args(argv)
    import warp as wp

    wp.config.quiet = True
    wp.config.log_level = wp.LOG_WARNING
    if args.command == "blender":
        write_blender_presets()
    elif args.command == "fit":
        t0 = time.perf_counter()
        write_fitted(args.names or list(MATERIALS), args.device, args.max_iterations)
        print(f"done in {time.perf_counter() - t0:.0f} s")
    else:
        print_table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
