"""The fit phase of the robustness benchmark: ``python -m warp_core fit`` on each problem file.

Needs only numpy and warp-lang (no Blender), so it runs on a GPU machine as well. Each fit is
its own process: a scene that crashes, hangs or runs out of memory costs that scene, not the
run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from robustness_scenes import FitRecord, SceneSpec, determined_ranges

REPO = Path(__file__).resolve().parent.parent


@dataclass
class FitOptions:
    device: str = "cpu"
    precision: str = "float64"
    max_iters: int = 30  # the add-on's default
    time_budget_s: float | None = None
    timeout_s: float = 1800.0  # a hung fit is recorded as an error after this


def fit_command(npz: Path, result: Path, options: FitOptions) -> list[str]:
    command = [sys.executable, "-m", "warp_core", "fit", str(npz), "--out", str(result)]
    command += ["--device", options.device, "--precision", options.precision]
    command += ["--max-iters", str(options.max_iters), "--quiet"]
    if options.time_budget_s is not None:
        command += ["--time-budget", str(options.time_budget_s)]
    return command


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def record_from_result(index: int, path: Path, wall_s: float) -> FitRecord:
    summary = json.loads(path.read_text(encoding="utf-8"))
    return FitRecord(
        index=index,
        params={k: float(v) for k, v in summary["params"].items()},
        fit_s=float(summary["seconds"]),
        wall_s=wall_s,
        stop_reason=str(summary.get("stop_reason", "")),
        outcome=summary.get("outcome"),
        rmse_m=summary.get("rmse_m"),
        start_rmse_m=summary.get("initial_rmse_m"),
        iterations=summary.get("iterations"),
        matched_ranges=determined_ranges(summary.get("identifiability") or []),
    )


def fit_scene(out: Path, spec: SceneSpec, options: FitOptions) -> FitRecord:
    """Fit one problem file; any failure becomes the record's ``error``."""
    npz, result, log = (out / f"{spec.name}{ext}" for ext in (".npz", ".result.json", ".fit.log"))
    result.unlink(missing_ok=True)  # never read a previous run's result
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            fit_command(npz, result, options),
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=options.timeout_s,
        )
    except subprocess.TimeoutExpired as e:
        wall = time.perf_counter() - t0
        return FitRecord(spec.index, wall_s=wall, error=f"timed out after {e.timeout:.0f} s")
    wall = time.perf_counter() - t0
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    # 4: the fit ran and wrote its result, but does not match its targets (its outcome says so)
    if done.returncode not in (0, 4) or not result.is_file():
        reason = last_line(done.stderr) or last_line(done.stdout) or "no output"
        return FitRecord(spec.index, wall_s=wall, error=f"exit {done.returncode}: {reason}")
    try:
        return record_from_result(spec.index, result, wall)
    except (ValueError, KeyError, TypeError) as e:
        return FitRecord(spec.index, wall_s=wall, error=f"unreadable result: {e}")
