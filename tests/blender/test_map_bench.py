"""The weight-map benchmark's smoke run (``bench/maps.py --quick``): one small region scene
made by Blender's cloth with a hidden map, fitted from Blender's defaults, written back
through the add-on and replayed by Blender's cloth; nothing recorded into bench/results."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from addon_scenes import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))

import maps  # noqa: E402

RESULT = REPO_ROOT / "bench" / "results" / "maps.json"


def test_the_quick_run_finds_the_regions_and_blender_replays_them(tmp_path: Path) -> None:
    before = RESULT.read_bytes() if RESULT.is_file() else None
    assert maps.main(["--out", str(tmp_path), "--quick", "--seed", "1"]) == 0
    assert (RESULT.read_bytes() if RESULT.is_file() else None) == before

    (record,) = json.loads((tmp_path / "records.json").read_text())["records"]
    assert record["mode"] == "regions" and not record["error"], record["error"]
    assert record["counted"]
    assert record["spec"]["grid"] == 8 and record["vertices"] == 64
    # the fit's own model and Blender's replay of the written map both land within 1 mm, and
    # well inside it; the best uniform value does not, so the map is what matched
    assert record["outcome"] == "converged", record["outcome_reason"]
    assert 0.0 <= record["fit_rmse_m"] < 1e-4
    assert math.isfinite(record["replay_rmse_m"]) and record["replay_rmse_m"] < 1e-4
    assert record["replay_max_m"] < 1e-3
    assert record["uniform_replay_rmse_m"] > 1e-3
    assert record["group"] == "Fit Structural Stiffness"
    for name, value in record["truth"].items():
        assert record["determined"][name]
        assert abs(record["fitted"][name] / value - 1.0) < 0.05, (name, record["fitted"])

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["regions: replay within 1 mm (wanted >= 90 %)"] == "1 of 1 (100 %): met"
    assert summary["regions: converged with a replay over 1 mm, every scene drawn (wanted 0)"] == "0: met"
    regions = len(record["truth"])
    claimed = "regions: determined region values within 5 %, fits called converged (wanted all)"
    assert summary[claimed] == f"{regions} of {regions} (100 %): met"
    assert summary["regions: scenes"] == "1 (1 structural); 0 failed"
    for suffix in ("blend", "map.npz", "uniform.npz", "map.record.json", "uniform.record.json"):
        assert (tmp_path / f"regions_00.{suffix}").is_file(), suffix
