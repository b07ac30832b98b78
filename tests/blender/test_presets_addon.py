"""Material presets in Blender (real bpy): apply, use as start, save fitted, rename, delete,
import, export, the menus, and a fresh session seeing saved presets."""

from __future__ import annotations

import ast
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import blender_env
import bpy
import numpy as np
import pytest

PKG = blender_env.import_addon_package()
addon_presets = importlib.import_module(f"{PKG.__name__}.addon.presets")
preset_menus = importlib.import_module(f"{PKG.__name__}.addon.ui.preset_menus")
preset_operators = importlib.import_module(f"{PKG.__name__}.addon.ui.preset_operators")
core = importlib.import_module(f"{PKG.__name__}.warp_core.presets")
PARAMETER_NAMES = importlib.import_module(f"{PKG.__name__}.warp_core.models.blender_cloth").PARAMETER_NAMES

BUILTIN_NAMES = [p.name for p in core.list_presets(core.BUILTIN_DIR, None)]

RESULT = {
    "name": "Shirt",
    "object": "Shirt",
    "model": "blender_cloth",
    "params": {
        "tension_stiffness": 31.416,
        "compression_stiffness": 31.416,
        "bending_stiffness": 2.718281828,
        "tension_damping": 7.25,
    },
    "initial_params": {"tension_stiffness": 15.0, "bending_stiffness": 0.5, "tension_damping": 5.0},
    "rmse_m": 0.0031,
    "max_error_m": 0.0112,
    "iterations": 8,
    "seconds": 41.5,
    "target_frames": [12, 24],
    "start_values": {},
    "blend_file": "/projects/shirt.blend",
    "date": "2026-11-30T10:00:00+00:00",
    "device": "cpu",
    "addon_version": "0.1.0",
}


@pytest.fixture(autouse=True)
def user_dir() -> Path:
    """The user presets folder, empty at the start and end of each test."""
    path = addon_presets.user_presets_dir()
    for d in (path,):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def cloth_object(name: str = "Cloth", with_cloth: bool = True) -> bpy.types.Object:
    me = bpy.data.meshes.new(name)
    me.from_pydata([(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0)], [], [(0, 1, 2, 3)])
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    if with_cloth:
        ob.modifiers.new("Cloth", "CLOTH")
    bpy.context.view_layer.objects.active = ob
    return ob


def settings_of(ob: bpy.types.Object) -> dict[str, float]:
    s = ob.modifiers["Cloth"].settings
    return {"quality": s.quality, **{k: getattr(s, k) for k in PARAMETER_NAMES}}


def as_blender(key: str, value: float) -> float:
    """What a ClothSettings field holds after being set to ``value`` (floats are float32)."""
    return int(value) if key == "quality" else float(np.float32(value))


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (not following links) with its content."""
    out = {}
    for dirpath, _dirs, files in os.walk(root, followlinks=False):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes() if p.is_file() and not p.is_symlink() else b""
    return out


def test_user_presets_dir_outside_an_extension_install() -> None:
    """Loaded as a plain package, presets go to the user scripts folder (the test profile)."""
    expected = Path(os.environ["BLENDER_USER_SCRIPTS"]) / "presets" / "fit_to_target"
    assert addon_presets.user_presets_dir().resolve() == expected.resolve()
    assert str(expected).startswith(str(blender_env.SESSION_TMP))


def test_user_presets_dir_of_an_installed_extension(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = []

    def extension_path_user(package: str, path: str = "", create: bool = False) -> str:
        calls.append((package, path, create))
        return str(tmp_path / path)

    monkeypatch.setattr(bpy.utils, "extension_path_user", extension_path_user)
    monkeypatch.setattr(addon_presets, "EXTENSION_PACKAGE", "bl_ext.user_default.fit_to_target")
    assert addon_presets.user_presets_dir() == tmp_path / "presets"
    assert calls == [("bl_ext.user_default.fit_to_target", "presets", True)]


def test_registered_ui() -> None:
    for name in ("FIT_MT_presets", "FIT_PT_presets"):
        assert hasattr(bpy.types, name)
    for op in ("apply", "use_as_start", "save_fitted", "rename", "delete", "import", "export"):
        assert hasattr(bpy.ops.fit, f"preset_{op}")
    panel = preset_menus.FIT_PT_presets
    assert panel.bl_parent_id == "FIT_PT_main" and panel.bl_category == "Fit"
    assert "UNDO" in preset_operators.FIT_OT_preset_apply.bl_options  # one undo step


class FakeLayout:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def operator(self, idname: str, text: str = "", icon: str = "NONE") -> SimpleNamespace:
        props = SimpleNamespace()
        self.calls.append(("operator", idname, text, props))
        return props

    def label(self, text: str = "", icon: str = "NONE") -> None:
        self.calls.append(("label", text))

    def menu(self, idname: str, text: str = "", icon: str = "NONE") -> None:
        self.calls.append(("menu", idname, text))

    def separator(self) -> None:
        pass

    def column(self, align: bool = False) -> FakeLayout:
        return self


def test_menus_list_builtin_then_user_presets(user_dir: Path) -> None:
    core.save_preset_file(core.Preset("My Cloth", {"mass": 0.5}), user_dir)
    (user_dir / "broken.json").write_text("{not json")
    layout = FakeLayout()
    preset_menus.FIT_MT_presets.draw(SimpleNamespace(layout=layout), bpy.context)
    applied = [c[3].name for c in layout.calls if c[0] == "operator" and c[1] == "fit.preset_apply"]
    blender = ["Cotton", "Denim", "Leather", "Rubber", "Silk"]
    fitted = [n for n in BUILTIN_NAMES if n not in blender]
    assert len(fitted) >= 5
    assert applied == blender + fitted + ["My Cloth"]
    labels = [c[1] for c in layout.calls if c[0] == "label"]
    assert labels[:3] == ["Blender", "Fitted by Fit to Target", "User"]
    assert "1 preset file(s) skipped (see the console)" in labels
    menus = [c[1] for c in layout.calls if c[0] == "menu"]
    assert menus == [
        "FIT_MT_presets_start",
        "FIT_MT_presets_export",
        "FIT_MT_presets_rename",
        "FIT_MT_presets_delete",
    ]
    ops = [c[1] for c in layout.calls if c[0] == "operator"]
    assert "fit.preset_save_fitted" in ops and "fit.preset_import" in ops
    # rename and delete offer user presets only
    layout = FakeLayout()
    preset_menus.FIT_MT_presets_delete.draw(SimpleNamespace(layout=layout), bpy.context)
    assert [c[3].name for c in layout.calls if c[0] == "operator"] == ["My Cloth"]
    # the sub-panel's header draws the preset menu
    layout = FakeLayout()
    preset_menus.FIT_PT_presets.draw_header_preset(SimpleNamespace(layout=layout), bpy.context)
    assert layout.calls == [("menu", "FIT_MT_presets", "Presets")]


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_apply_builtin_sets_exactly_the_files_values(name: str) -> None:
    ob = cloth_object()
    before = settings_of(ob)
    bpy.ops.fit.preset_apply(name=name)
    after = settings_of(ob)
    file_values = json.loads((core.BUILTIN_DIR / core.safe_filename(name)).read_text())["values"]
    for key, value in after.items():
        expected = as_blender(key, file_values[key]) if key in file_values else before[key]
        assert value == expected, key
    if name in ("Cotton", "Denim", "Leather", "Rubber", "Silk"):
        # the same as Blender's own preset file (read with ast, never run)
        path = Path(bpy.utils.preset_paths("cloth")[0]) / f"{name}.py"
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and node.targets[0].attr in after:
                key = node.targets[0].attr
                assert after[key] == as_blender(key, ast.literal_eval(node.value)), key


def test_apply_needs_a_cloth_modifier() -> None:
    ob = cloth_object("Plane", with_cloth=False)
    with pytest.raises(RuntimeError, match="Plane has no Cloth modifier: add one"):
        bpy.ops.fit.preset_apply(name="Denim")
    assert len(ob.modifiers) == 0
    cloth_object()
    with pytest.raises(RuntimeError, match="no preset named 'Tweed'"):
        bpy.ops.fit.preset_apply(name="Tweed")


def test_use_as_start_writes_the_start_values() -> None:
    ob = cloth_object()
    assert hasattr(ob, "fit_to_target"), "the add-on's object settings are not registered"
    bpy.ops.fit.preset_use_as_start(name="leather")
    start = json.loads(ob.fit_to_target.start_values_json)
    assert start == core.find_preset("Leather").values
    assert settings_of(ob)["tension_stiffness"] == 15.0  # the modifier itself is unchanged
    request = importlib.import_module(f"{PKG.__name__}.addon.request")
    fields = importlib.import_module(f"{PKG.__name__}.warp_core.models.blender_cloth").CLOTH_SETTINGS_FIELDS
    assert request.parse_start_values(ob.fit_to_target.start_values_json, ob.name, fields) == start


def run_fresh_session(code: str) -> str:
    """Run ``code`` in a new Python process with the same Blender user profile (environment)."""
    import_root = Path(PKG.__file__).parent.parent
    script = f"import sys\nsys.path.insert(0, {str(import_root)!r})\n" + code
    proc = subprocess.run(
        [sys.executable, "-c", script], env=dict(os.environ), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_save_fitted_as_preset_round_trip(user_dir: Path) -> None:
    ob = cloth_object("Shirt")
    ob.modifiers["Cloth"].settings.mass = 0.45
    ob.modifiers["Cloth"].settings.quality = 8
    assert not bpy.ops.fit.preset_save_fitted.poll()  # no result yet
    ob.fit_to_target.result_json = json.dumps(RESULT)
    assert bpy.ops.fit.preset_save_fitted.poll()
    bpy.ops.fit.preset_save_fitted(name="Shirt Cotton", notes="Fitted to the March shoot")
    path = user_dir / "shirt_cotton.json"
    assert sorted(p.name for p in user_dir.iterdir()) == ["shirt_cotton.json"]
    data = json.loads(path.read_text())
    assert data["name"] == "Shirt Cotton" and data["notes"] == "Fitted to the March shoot"
    for key, value in RESULT["params"].items():
        assert data["values"][key] == value
    assert data["values"]["mass"] == pytest.approx(0.45) and data["values"]["quality"] == 8
    assert data["provenance"] == {
        "source_blend": "/projects/shirt.blend",
        "object": "Shirt",
        "target_frames": [12, 24],
        "fit_rmse_m": 0.0031,
        "fit_max_error_m": 0.0112,
        "fit_seconds": 41.5,
        "date": "2026-11-30T10:00:00+00:00",
        "addon_version": "0.1.0",
        "device": "cpu",
        "fit_parameters": [
            "tension_stiffness",
            "compression_stiffness",
            "bending_stiffness",
            "tension_damping",
        ],
    }

    # same name again: refused unless overwriting; a built-in's name or a bad name: refused
    with pytest.raises(RuntimeError, match="a preset named 'Shirt Cotton' already exists"):
        bpy.ops.fit.preset_save_fitted(name="shirt cotton")
    bpy.ops.fit.preset_save_fitted(name="shirt cotton", overwrite=True)
    with pytest.raises(RuntimeError, match="a built-in preset has that name"):
        bpy.ops.fit.preset_save_fitted(name="Silk")
    with pytest.raises(RuntimeError, match="contains a path separator"):
        bpy.ops.fit.preset_save_fitted(name="../../Shirt")
    assert sorted(p.name for p in user_dir.iterdir()) == ["shirt_cotton.json"]

    # a new session (after loading a new file, and in a new process) lists it
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    assert "shirt cotton" in [p.name for p in addon_presets.all_presets()]
    # the add-on's lookup (used by the batch command) includes the user folder; the core's only
    # when given it
    assert addon_presets.find_preset("Shirt Cotton").path.resolve() == path.resolve()
    assert core.find_preset("Shirt Cotton", addon_presets.user_presets_dir()).path.resolve() == path.resolve()
    with pytest.raises(core.PresetError, match="no preset named 'Shirt Cotton'"):
        core.find_preset("Shirt Cotton")
    out = json.loads(
        run_fresh_session(
            "import json, fit_to_target.addon.presets as addon_presets\n"
            "p = addon_presets.find_preset('SHIRT COTTON')\n"
            "print(json.dumps({'names': [q.name for q in addon_presets.all_presets()], 'values': p.values,"
            " 'path': str(p.path), 'builtin': p.builtin}))\n"
        )
    )
    assert out["names"] == BUILTIN_NAMES + ["shirt cotton"]
    assert Path(out["path"]).resolve() == path.resolve() and out["builtin"] is False
    assert out["values"] == json.loads(path.read_text())["values"]

    # applying it to another object reproduces the fitted values
    other = cloth_object("Other")
    bpy.ops.fit.preset_apply(name="shirt cotton")
    got = settings_of(other)
    for key, value in RESULT["params"].items():
        assert got[key] == as_blender(key, value)
    assert got["quality"] == 8 and got["mass"] == as_blender("mass", 0.45)


def test_save_fitted_rejects_unusable_results(user_dir: Path) -> None:
    ob = cloth_object()
    ob.fit_to_target.result_json = "{broken"
    with pytest.raises(RuntimeError, match="cannot be read"):
        bpy.ops.fit.preset_save_fitted(name="X")
    ob.fit_to_target.result_json = json.dumps(dict(RESULT, params={"air_damping": float("nan")}))
    with pytest.raises(RuntimeError, match="has a value that is not a finite number"):
        bpy.ops.fit.preset_save_fitted(name="X")
    ob.fit_to_target.result_json = json.dumps(dict(RESULT, model="fluid"))
    with pytest.raises(RuntimeError, match="presets hold settings of 'blender_cloth', 'soft_body'"):
        bpy.ops.fit.preset_save_fitted(name="X")
    assert list(user_dir.iterdir()) == []


def test_rename_and_delete_user_presets_only(user_dir: Path) -> None:
    core.save_preset_file(core.Preset("Mine", {"mass": 0.5, "quality": 6}), user_dir)
    core.save_preset_file(core.Preset("Other", {"mass": 0.7}), user_dir)
    bpy.ops.fit.preset_rename(name="mine", new_name="Mine Renamed")
    assert sorted(p.name for p in user_dir.iterdir()) == ["mine_renamed.json", "other.json"]
    assert addon_presets.find_preset("Mine Renamed").values == {"quality": 6, "mass": 0.5}
    with pytest.raises(RuntimeError, match="A preset named 'Other' already exists"):
        bpy.ops.fit.preset_rename(name="Mine Renamed", new_name="other")
    with pytest.raises(RuntimeError, match="a built-in preset has that name|already exists"):
        bpy.ops.fit.preset_rename(name="Mine Renamed", new_name="Denim")
    with pytest.raises(RuntimeError, match="contains '..'"):
        bpy.ops.fit.preset_rename(name="Mine Renamed", new_name="..")
    for builtin in ("Denim", "Canvas"):
        with pytest.raises(RuntimeError, match=f"'{builtin}' is a built-in preset and cannot be renamed"):
            bpy.ops.fit.preset_rename(name=builtin, new_name="Mine 2")
        with pytest.raises(RuntimeError, match=f"'{builtin}' is a built-in preset and cannot be deleted"):
            bpy.ops.fit.preset_delete(name=builtin)
        assert (core.BUILTIN_DIR / core.safe_filename(builtin)).is_file()
    bpy.ops.fit.preset_delete(name="mine renamed")
    assert sorted(p.name for p in user_dir.iterdir()) == ["other.json"]
    with pytest.raises(RuntimeError, match="no preset named 'Mine Renamed'"):
        bpy.ops.fit.preset_delete(name="Mine Renamed")


def good_preset_text(**changes) -> str:
    d = {
        "schema": 1,
        "name": "Shared Wool",
        "model": "blender_cloth",
        "values": {"quality": 6, "mass": 0.7, "bending_stiffness": 12.5},
        "notes": "from a colleague",
    }
    d.update(changes)
    return json.dumps(d)


def test_import_validates_and_copies(user_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "Some File Name.JSON"
    src.write_text(good_preset_text())
    bpy.ops.fit.preset_import(filepath=str(src))
    assert [p.name for p in user_dir.iterdir()] == ["shared_wool.json"]
    shared = addon_presets.find_preset("Shared Wool")
    assert shared.values == {"quality": 6, "mass": 0.7, "bending_stiffness": 12.5}
    with pytest.raises(RuntimeError, match="a preset named 'Shared Wool' already exists"):
        bpy.ops.fit.preset_import(filepath=str(src))
    src.write_text(good_preset_text(values={"mass": 0.9}))
    bpy.ops.fit.preset_import(filepath=str(src), overwrite=True)
    assert addon_presets.find_preset("Shared Wool").values == {"mass": 0.9}
    src.write_text(good_preset_text(name="silk"))
    with pytest.raises(RuntimeError, match="Not imported: cannot save preset 'silk': a built-in"):
        bpy.ops.fit.preset_import(filepath=str(src))


BAD_IMPORTS = {
    "malformed.json": (b'{"schema": 1, "name": ', "not valid JSON"),
    "unknown_key.json": (good_preset_text(run="os.system('x')").encode(), "unknown key\\(s\\) 'run'"),
    "unknown_value.json": (
        good_preset_text(values={"use_pressure": 1}).encode(),
        "unknown key\\(s\\) in values",
    ),
    "out_of_range.json": (
        good_preset_text(values={"tension_stiffness": 1e6}).encode(),
        "outside Blender's range",
    ),
    "non_numeric.json": (good_preset_text(values={"mass": "heavy"}).encode(), "values.mass must be a number"),
    "nan.json": (
        good_preset_text(values={"mass": 1}).replace(": 1}", ": NaN}").encode(),
        "NaN is not allowed",
    ),
    "separator.json": (good_preset_text(name="../../../../tmp/evil").encode(), "contains a path separator"),
    "dotdot.json": (good_preset_text(name="..").encode(), "contains '..'"),
    "control.json": (good_preset_text(name="evil\u0000.json").encode(), "control or invisible"),
    "huge.json": (b'{"schema": 1, "notes": "' + b"x" * (10 * 1024 * 1024) + b'"}', "larger than 64 KiB"),
    "script.py": (None, "not a .json file; presets are JSON and are never run"),
    "script_in.json": (None, "not valid JSON"),
}


@pytest.mark.parametrize("filename", list(BAD_IMPORTS))
def test_import_rejects_bad_files_and_writes_nothing(filename: str, user_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "code_ran"
    content, message = BAD_IMPORTS[filename]
    if content is None:
        content = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n".encode()
    src = tmp_path / "offered" / filename
    src.parent.mkdir()
    src.write_bytes(content)
    before_session = tree(blender_env.SESSION_TMP)
    before_tmp = tree(tmp_path)
    with pytest.raises(RuntimeError, match=f"Not imported: preset .*{filename}: .*{message}"):
        bpy.ops.fit.preset_import(filepath=str(src))
    assert tree(blender_env.SESSION_TMP) == before_session  # nothing written, user presets included
    assert tree(tmp_path) == before_tmp
    assert list(user_dir.iterdir()) == []
    assert not marker.exists()


def test_code_in_a_name_is_never_run(user_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "code_ran"
    name = f"__import__('os').system('touch {marker.name}')"
    src = tmp_path / "p.json"
    src.write_text(good_preset_text(name=name))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        bpy.ops.fit.preset_import(filepath=str(src))
        cloth_object()
        bpy.ops.fit.preset_apply(name=name)
        layout = FakeLayout()
        preset_menus.FIT_MT_presets.draw(SimpleNamespace(layout=layout), bpy.context)
        bpy.ops.fit.preset_rename(name=name, new_name="Harmless")
    finally:
        os.chdir(cwd)
    assert not marker.exists()
    assert [p.name for p in user_dir.iterdir()] == ["harmless.json"]


def test_export_writes_the_chosen_file(tmp_path: Path, user_dir: Path) -> None:
    target = tmp_path / "for_the_team"
    bpy.ops.fit.preset_export(name="canvas", filepath=str(target))
    written = tmp_path / "for_the_team.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["for_the_team.json"]
    exported = core.load_preset_file(written)
    canvas = core.find_preset("Canvas")
    assert (exported.name, exported.values, exported.notes, exported.provenance) == (
        canvas.name,
        canvas.values,
        canvas.notes,
        canvas.provenance,
    )
    assert "builtin" not in json.loads(written.read_text())
    # and it imports back as a user preset under a new name
    data = json.loads(written.read_text())
    data["name"] = "Canvas (team)"
    written.write_text(json.dumps(data))
    bpy.ops.fit.preset_import(filepath=str(written))
    assert addon_presets.find_preset("canvas (team)").values == canvas.values
    with pytest.raises(RuntimeError, match="no preset named 'Tweed'"):
        bpy.ops.fit.preset_export(name="Tweed", filepath=str(tmp_path / "x.json"))
    with pytest.raises(RuntimeError, match="does not exist"):
        bpy.ops.fit.preset_export(name="Denim", filepath=str(tmp_path / "missing" / "x.json"))
