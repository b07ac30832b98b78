"""A footage fit on each device: the synthetic markers of ``tests/core/test_tracks_fit.py``
(a hanging sheet filmed by a circling camera, 0.5 px noise) fitted from 3x off on the CPU
and on every CUDA device, in both precisions; prints the values, the reprojection RMSE, the
time and how far each device's fitted rollout is from the CPU's.

    python bench/footage_device.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "core")]

import warp as wp  # noqa: E402
from test_tracks_fit import FRAMES, footage, hanging_sheet  # noqa: E402

from warp_core import ClothParams, ClothSimulator  # noqa: E402
from warp_core.fit import FitProblem, FitSettings, fit  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    wp.init()
    mesh = hanging_sheet()
    truth = ClothParams(tension_stiffness=30.0, bending_stiffness=1.0)
    targets, _ = footage(mesh, truth, noise_px=0.5, seed=3)
    names = ["tension_stiffness", "bending_stiffness"]
    start = truth.replace(tension_stiffness=90.0, bending_stiffness=3.0)
    devices = ["cpu"] + [d.alias for d in wp.get_cuda_devices()]
    rows, reference = [], None
    for device in devices:
        for precision in ("float64", "float32"):
            problem = FitProblem(mesh, start, [], free_parameters=names, tracks=targets)
            t0 = time.perf_counter()
            result = fit(problem, FitSettings(device=device, precision=precision))
            seconds = time.perf_counter() - t0
            x = ClothSimulator(mesh, result.model_settings, precision="float64").simulate(max(FRAMES), FRAMES)
            if reference is None:
                reference = x
            row = {
                "device": device,
                "precision": precision,
                "outcome": result.outcome,
                "rmse_px": result.rmse,
                "params": result.params,
                "undetermined": result.undetermined,
                "seconds": seconds,
                "rollouts": result.n_forward,
                # the fitted values replayed on the CPU in float64, against the first row's
                "replay_gap_m": float(np.abs(x - reference).max()),
            }
            rows.append(row)
            print(
                f"{device:7s} {precision}: {result.outcome}, {result.rmse:.4f} px, "
                + ", ".join(f"{k} {v:.5g}" for k, v in result.params.items())
                + f", {seconds:.1f} s, {result.n_forward} rollouts, replay gap {row['replay_gap_m']:.2e} m"
            )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
