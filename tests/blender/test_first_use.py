"""What a first user meets: the README's promises and commands, batch.py outside the
project's environment, a quiet CPU run, and packages that hold only the extension."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType

import bpy
import pytest
from addon_scenes import REPO_ROOT, addon_module, make_demo_module
from batch_run import BATCH, our_errors, run_batch, tiny_scene

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
DOCS = REPO_ROOT / "docs"
MANIFEST = tomllib.loads((REPO_ROOT / "blender_manifest.toml").read_text(encoding="utf-8"))
warp_setup = addon_module("warp_setup")
DRIVER_WARNING = "Could not find or load the NVIDIA CUDA driver"


def section(title: str, text: str = README) -> str:
    """The text under the heading ``title`` (to the next heading of its level), whitespace
    collapsed: README.md's, or a page's of docs/."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return " ".join(text[start : end if end > 0 else None].split())


def page(name: str) -> str:
    """A page of the guide (docs/NAME), whitespace collapsed."""
    return " ".join((DOCS / name).read_text(encoding="utf-8").split())


# -- (11) the README says what there is, and how to run it ---------------------------------------------


def test_readme_promises_what_the_models_do() -> None:
    """Cloth and soft bodies, each with what it really offers: soft bodies fit by finite
    differences unless a script asks for their adjoint, which is only the rollout's gradient
    where VBD converges, and Blender's own solver does not replay them; the README and the
    soft-body page say so."""
    intro = " ".join(README[: README.index("\n## ")].split())
    assert "soft body" in intro and "for soft bodies finite differences" in intro, intro
    assert "the adjoint of their converged steps" in intro, intro
    text = page("soft-bodies.md")
    assert "Blender cannot replay this model" in text
    assert "the gradient of the steps VBD converges to" in text and "raise *Iterations*" in text


def test_readme_says_how_to_run_headless() -> None:
    text = page("headless.md")
    assert ".venv/bin/python batch.py" in text and "./dev setup" in text
    assert "pip install warp-lang==" in text  # a Blender binary needs Warp: how to get it
    assert "--loss" in text and "143" in text and "regular file" in text


def test_readme_states_requirements() -> None:
    text = section("Install")
    for needed in ("4.2", "5.0.1", "Windows", "Linux", "macOS", "NVIDIA", "Turing", "R580", "CPU"):
        assert needed in text, needed


def test_readme_zip_names_are_the_built_ones() -> None:
    text = section("Building the extension", (DOCS / "development.md").read_text(encoding="utf-8"))
    assert "fit_to_target-<version>-<platform>.zip" in section("Install")  # what a user installs
    build = _build_module()
    for platform in MANIFEST["platforms"]:
        built = build.package_name(MANIFEST, platform)  # what build.py writes
        assert built == f"fit_to_target-{MANIFEST['version']}-{platform.replace('-', '_')}.zip"
        assert platform.replace("-", "_") in text, platform
    assert "fit_to_target-<version>-<platform>.zip" in text
    assert "fit_to_target-<version>.zip" in text
    assert not re.search(r"windows-x64, linux-x64, macos-arm64", text)


def test_readme_lists_every_operator_for_scripts() -> None:
    ids = sorted(
        cls.bl_idname
        for module in (
            "ui.fit_operators",
            "ui.object_operators",
            "ui.bake_operators",
            "ui.result_operators",
            "ui.preset_operators",
            "ui.physics_link",
            "ui.map_operators",
        )
        for cls in addon_module(module).classes
    )
    missing = [i for i in ids if f"`{i}" not in page("cloth.md")]
    assert not missing, missing


# -- (11) batch.py outside the project's environment -------------------------------------------------


def test_batch_without_bpy_or_warp_says_how_to_run_it(tmp_path: Path) -> None:
    # -S: no site-packages, as with a system Python that has neither bpy nor warp
    proc = subprocess.run(
        [sys.executable, "-S", str(BATCH), str(tmp_path / "scene.blend")], capture_output=True, text=True
    )
    assert proc.returncode == 2, proc.stderr
    (line,) = our_errors(proc.stderr)
    assert ".venv/bin/python batch.py" in line and "./dev setup" in line, line
    assert "Traceback" not in proc.stderr


# -- (11) a CPU run does not print the missing-driver warning ------------------------------------------


def test_cpu_run_prints_no_driver_warning(tmp_path: Path) -> None:
    scene = tiny_scene(tmp_path / "tiny.blend")
    proc = run_batch(scene, "--quiet", "--max-iters", "1")
    assert proc.returncode == 0, proc.stderr
    assert DRIVER_WARNING not in proc.stderr


def test_only_the_driver_warning_is_held_back(capfd: pytest.CaptureFixture[str]) -> None:
    def noisy() -> None:
        os.write(2, warp_setup.DRIVER_MISSING + b". GPU execution will not be available.\n")
        os.write(2, b"Warp CUDA error: Warp requires CUDA driver 13.0 or higher\n")

    captured = warp_setup._stderr_of(noisy)
    err = capfd.readouterr().err
    assert DRIVER_WARNING in captured.decode()
    assert DRIVER_WARNING not in err
    assert "Warp CUDA error: Warp requires CUDA driver 13.0 or higher" in err  # real errors still show


def test_asking_for_cuda_without_a_driver_says_so() -> None:
    warp_setup.configure_warp()
    if not warp_setup.WARP.driver_missing:
        pytest.skip("this machine has an NVIDIA driver")
    with pytest.raises(ValueError, match="no NVIDIA CUDA driver found; CUDA needs an NVIDIA GPU"):
        warp_setup.resolve_device("cuda")


# -- (11) packages hold the extension only -------------------------------------------------------------


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fit_to_target_build_first_use", REPO_ROOT / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_scene_is_made_outside_the_source_tree() -> None:
    path = make_demo_module().DEFAULT_PATH
    assert path.is_relative_to(REPO_ROOT / "out"), path


def test_a_scene_left_in_the_tree_is_not_packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "checkout"
    skip = shutil.ignore_patterns(".git", ".venv", "out", "dist", "wheels", "__pycache__", "*.blend*")
    shutil.copytree(REPO_ROOT, tree, ignore=skip)
    bpy.ops.wm.save_as_mainfile(
        filepath=str(tree / "assets" / "demo.blend"), copy=True
    )  # the demo's leftover
    (tree / "assets" / "demo.blend1").write_bytes(b"BLENDER backup")
    (tree / "assets" / ".report.json.fit-tmp-0a1b2c3d-99-ab.tmp").write_bytes(b"{")
    build = _build_module()
    monkeypatch.setattr(build, "ROOT", tree)
    zip_path = build.build_without_wheels(tmp_path / "dist")
    assert zip_path.name == f"fit_to_target-{MANIFEST['version']}.zip"
    names = zipfile.ZipFile(zip_path).namelist()
    leaked = [n for n in names if ".blend" in n or ".fit-tmp-" in n]
    assert not leaked, leaked
    assert "assets/make_demo.py" in names and "assets/presets/cotton.json" in names
