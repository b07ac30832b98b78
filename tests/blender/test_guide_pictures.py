"""The artist guide's pictures (``docs/images/guide-*``, written by ``tools/guide_pictures.py``)
are what the add-on draws now: the panel diagrams are the ones the panel code's draw calls
give for the guide's scene, the loss curve is the add-on's curve of the fit the result
diagram shows, and the renders show the colours the guide describes. No fit, no render: the
result diagram keeps the state it shows, which is put back on a scene built here."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import guide_scene
import numpy as np
from addon_scenes import TMP, make_demo_module

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tools"))

import guide_pictures  # noqa: E402
import panel_diagram  # noqa: E402

GUIDE = REPO_ROOT / "docs" / "artist-guide.md"
IMAGES = REPO_ROOT / "docs" / "images"
REGENERATE = "the guide's pictures are stale: run .venv/bin/python tools/guide_pictures.py --out docs/images"
PICTURES = (
    guide_pictures.BEFORE_SVG,
    guide_pictures.RESULT_SVG,
    guide_pictures.CURVE_PNG,
    *guide_pictures.ERROR_PNGS,
)


def committed_state() -> dict:
    state = panel_diagram.metadata_of((IMAGES / guide_pictures.RESULT_SVG).read_text(encoding="utf-8"))
    assert state is not None, REGENERATE
    return state["fit_to_target"]


def test_the_guide_shows_every_picture_and_each_is_there() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    shown = re.findall(r"!\[[^\]]+\]\((images/[^)\s]+)\)", text)
    assert sorted(shown) == sorted(f"images/{name}" for name in PICTURES)
    for name in PICTURES:
        assert (IMAGES / name).is_file(), (name, REGENERATE)
    assert not [p.name for p in IMAGES.glob("guide-*") if p.name not in PICTURES]  # none left over


def test_the_panel_diagrams_are_what_the_panel_draws() -> None:
    cloth = guide_scene.build_guide_scene(TMP / "guide")
    context = guide_scene.SidebarContext()
    before = guide_scene.record_sidebar(context, guide_scene.OPEN_BEFORE)
    svg = panel_diagram.diagram_svg(before, guide_pictures.BEFORE_TITLE)
    assert svg == (IMAGES / guide_pictures.BEFORE_SVG).read_text(encoding="utf-8"), REGENERATE
    # the targets as Add Current Frame put them, and no Result sub-panel before a fit
    for name in make_demo_module().TARGET_FRAMES:
        assert f">Target.f{name:03d}<" in svg and f">{name}<" in svg
    assert ">Result<" not in svg and ">Add Current Frame<" in svg

    state = committed_state()
    guide_scene.restore_fit_state(cloth, state)
    result = guide_scene.record_sidebar(context, guide_scene.OPEN_RESULT)
    svg = panel_diagram.diagram_svg(result, guide_pictures.RESULT_TITLE, {"fit_to_target": state})
    assert svg == (IMAGES / guide_pictures.RESULT_SVG).read_text(encoding="utf-8"), REGENERATE
    for text in ("Targets matched (within ", "Open Loss Curve", "loss curve picture", "Green: up to "):
        assert text in svg, text


def test_the_pictures_show_a_fit_that_matched_its_targets() -> None:
    """The committed state is a converged fit of the demo to the values that made its targets,
    the error shown green everywhere with those values."""
    state = committed_state()
    record = json.loads(state["result_json"])
    truth = make_demo_module().TRUE_VALUES
    assert record["outcome"] == "converged" and record["rmse_m"] <= record["tolerance_m"]
    for name in ("tension_stiffness", "bending_stiffness"):
        assert abs(record["params"][name] / truth[name] - 1.0) < 0.02, (name, record["params"][name])
    assert state["applied"] and json.loads(state["previous_values_json"])["tension_stiffness"] == 15.0
    overlay = json.loads(state["error_overlay_json"])
    assert overlay["frame"] == guide_pictures.ERROR_FRAME and overlay["counts"] == [144, 0, 0]


def test_the_loss_curve_is_the_addons_curve_of_that_fit() -> None:
    record = json.loads(committed_state()["result_json"])
    drawn = guide_scene.curve_rgb(record, *guide_pictures.CURVE_PX)
    committed = guide_pictures.read_png(IMAGES / guide_pictures.CURVE_PNG)
    assert committed.shape == drawn.shape and np.array_equal(committed, drawn), REGENERATE


def _reds_and_greens(name: str) -> tuple[int, int]:
    rgb = guide_pictures.read_png(IMAGES / name).astype(int)
    assert rgb.shape == (300, 480, 3), name
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    red = (r > 140) & (r > 2 * g) & (r > 2 * b)
    green = (g > 140) & (g > 2 * r) & (g > 2 * b)
    return int(red.sum()), int(green.sum())


def test_the_renders_show_the_error_colours_the_guide_describes() -> None:
    """Start values: the cloth red but for its clamped rows; fitted values: green, no red."""
    before, after = (_reds_and_greens(name) for name in guide_pictures.ERROR_PNGS)
    assert before[0] > 5000 and before[0] > 3 * before[1], before
    assert after[1] > 5000 and after[0] == 0, after
    for name in guide_pictures.ERROR_PNGS:
        assert (IMAGES / name).stat().st_size < 150_000, name


def test_the_png_writer_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    path = tmp_path / "p.png"
    path.write_bytes(guide_pictures.png_bytes(rgb))
    assert np.array_equal(guide_pictures.read_png(path), rgb)
