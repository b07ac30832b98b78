"""A fit's outcome reaches the user: batch exit codes and report, --tolerance, the panel.

The scene is a small clamped sheet whose targets Blender's own cloth made with tension =
compression 30 (Blender's default is 15). Fitting tension finds it; fitting bending alone
cannot reach the targets, which must never read as a success.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from batch_run import run_batch, tiny_scene
from test_addon_panel import draw, labels


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_scene(tmp_path_factory.mktemp("outcome") / "sheet.blend")


def fit(scene: Path, tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    report = tmp_path / "report.json"
    done = run_batch(scene, "--quiet", "--report", report, *args)
    return done.returncode, json.loads(report.read_text()), done.stdout + done.stderr


def test_a_converged_fit_exits_0(scene: Path, tmp_path: Path) -> None:
    code, report, _ = fit(scene, tmp_path, "--fit", "tension_stiffness")
    record = report["objects"][0]
    assert code == 0 and report["status"] == "ok" and report["exit_code"] == 0
    assert record["outcome"] == "converged"
    assert record["rmse_m"] <= record["tolerance_m"] <= 1e-3
    assert record["params"]["tension_stiffness"] == pytest.approx(30.0, rel=1e-3)


def test_a_fit_that_cannot_match_exits_4_and_says_why(scene: Path, tmp_path: Path) -> None:
    code, report, output = fit(scene, tmp_path, "--fit", "bending_stiffness")
    record = report["objects"][0]
    assert code == 4 and report["status"] == "not_converged" and report["exit_code"] == 4
    assert record["outcome"] in ("misfit", "stalled") and record["outcome_reason"]
    assert record["rmse_m"] > record["tolerance_m"]
    assert f"outcome: {record['outcome']}" in output
    assert "not matched to the targets: Cloth" in output.splitlines()[-1]
    # the values are still written: the best found, said to be not an answer
    assert (tmp_path / "report.json").is_file()


def test_tolerance_sets_what_counts_as_matched(scene: Path, tmp_path: Path) -> None:
    _, strict, _ = fit(scene, tmp_path, "--fit", "bending_stiffness")
    off_mm = strict["objects"][0]["rmse_m"] * 1e3
    code, loose, _ = fit(scene, tmp_path, "--fit", "bending_stiffness", "--tolerance", f"{2 * off_mm:.6g}")
    record = loose["objects"][0]
    assert record["tolerance_m"] == pytest.approx(2 * off_mm * 1e-3, rel=1e-5)
    assert code == 0 and record["outcome"] == "converged"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_tolerance_must_be_a_positive_length(scene: Path, tmp_path: Path, value: str) -> None:
    done = run_batch(scene, "--fit", "tension_stiffness", "--tolerance", value)
    assert done.returncode == 2 and "--tolerance" in done.stderr


def test_panel_warns_instead_of_a_success() -> None:
    import bpy
    from addon_scenes import clamped_cloth

    ob = clamped_cloth()
    bpy.context.view_layer.objects.active = ob
    base = {"name": "Cloth", "iterations": 3, "seconds": 1.0, "params": {}, "initial_params": {}}
    reason = "RMSE 12 mm is 40 % of the motion"
    ob.fit_to_target.result_json = json.dumps(
        {**base, "outcome": "misfit", "outcome_reason": reason, "tolerance_m": 1e-3}
    )
    text = labels(draw())
    assert "Not matched: misfit" in text and reason in text
    assert not [t for t in text if t.startswith("Targets matched")]
    ob.fit_to_target.result_json = json.dumps({**base, "outcome": "converged", "tolerance_m": 1e-3})
    text = labels(draw())
    assert "Targets matched (within 1 mm)" in text and not [t for t in text if t.startswith("Not matched")]
