"""Material presets, the core side (``warp_core.presets``): validation, files, the built-in library;
and the add-on's readers of Blender's own presets and of fit results (``addon.presets``)."""

from __future__ import annotations

import ast
import importlib
import json
import math
import os
from pathlib import Path

import blender_env
import bpy
import pytest

# one package, so that PresetError and Preset are the same classes in the core and the add-on
PKG = blender_env.import_addon_package()
pr = importlib.import_module(f"{PKG.__name__}.warp_core.presets")
pr_files = importlib.import_module(f"{PKG.__name__}.warp_core.presets.files")
addon_presets = importlib.import_module(f"{PKG.__name__}.addon.presets")
_params = importlib.import_module(f"{PKG.__name__}.warp_core.models.blender_cloth.params")
PARAMETER_BOUNDS, PARAMETER_NAMES = _params.PARAMETER_BOUNDS, _params.PARAMETER_NAMES

BLENDER_PRESETS = ("Cotton", "Denim", "Leather", "Rubber", "Silk")
FITTED_PRESETS = ("Canvas", "Jersey Knit", "Linen", "PVC", "Wool Felt")


def good_dict(**changes) -> dict:
    d = {
        "schema": 1,
        "name": "Test Cloth",
        "model": "blender_cloth",
        "values": {"quality": 6, "mass": 0.4, "tension_stiffness": 20.0, "bending_stiffness": 1.5},
        "notes": "a note\nover two lines",
        "provenance": {"target_frames": [10, 20], "fit_rmse_m": 0.001, "date": "2026-11-30"},
    }
    d.update(changes)
    return d


def good_text(**changes) -> str:
    return json.dumps(good_dict(**changes))


def with_values(**values) -> str:
    d = good_dict()
    d["values"] = dict(d["values"], **values)
    return json.dumps(d)


def blender_preset_file_values(name: str) -> dict:
    """Assignments of Blender's own presets/cloth/<name>.py, read with ast (not run)."""
    for directory in bpy.utils.preset_paths("cloth"):
        path = Path(directory) / f"{name}.py"
        if path.is_file():
            break
    else:
        raise AssertionError(f"Blender's {name} cloth preset not found in {bpy.utils.preset_paths('cloth')}")
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            (target,) = node.targets
            assert ast.unparse(target.value) == "bpy.context.cloth.settings"
            out[target.attr] = ast.literal_eval(node.value)
    return out


# ---------------------------------------------------------------------------- built-in library


def test_builtin_library_is_valid_and_complete() -> None:
    warnings: list[str] = []
    presets = pr.list_presets(pr.BUILTIN_DIR, None, warnings)
    assert warnings == []
    names = [p.name for p in presets]
    assert set(BLENDER_PRESETS) | set(FITTED_PRESETS) <= set(names)
    assert all(p.builtin for p in presets)
    files = sorted(f.name for f in pr.BUILTIN_DIR.iterdir())
    assert all(f.endswith(".json") for f in files), files  # nothing runnable ships as a preset
    for p in presets:
        assert p.path.name == pr.safe_filename(p.name)
        # the file is exactly what the writer produces (stable diffs when regenerated)
        assert p.path.read_text(encoding="utf-8") == pr.preset_to_json(p)


@pytest.mark.parametrize("name", BLENDER_PRESETS)
def test_blender_presets_match_blenders_own_files(name: str) -> None:
    """Our JSON holds exactly the values Blender's preset sets, for every field our model knows;
    the fields left out are the internal-spring and pressure ones, which the preset turns off."""
    blender = blender_preset_file_values(name)
    ours = pr.load_preset_file(pr.BUILTIN_DIR / pr.safe_filename(name), builtin=True)
    known = {k: v for k, v in blender.items() if k in pr.VALUE_KEYS}
    assert set(ours.values) == set(known)
    for key, value in known.items():
        assert ours.values[key] == value and type(ours.values[key]) is (int if key == "quality" else float)
    left_out = set(blender) - set(known)
    assert all(
        k.startswith(("internal_", "use_", "uniform_pressure", "pressure", "target_volume", "fluid"))
        for k in left_out
    ), left_out
    assert blender["use_internal_springs"] is False and blender["use_pressure"] is False
    assert not ours.provenance  # Blender's, not fitted
    # the repository's reader of Blender's presets agrees with this test's own reading
    path = Path(bpy.utils.preset_paths("cloth")[0]) / f"{name}.py"
    assert addon_presets.blender_preset_values(addon_presets.read_blender_cloth_preset(path)) == ours.values


@pytest.mark.parametrize("name", FITTED_PRESETS)
def test_fitted_presets_carry_their_drape_test(name: str) -> None:
    p = pr.find_preset(name)
    assert p.builtin and p.values["quality"] == 5
    prov = p.provenance
    assert prov["drape_test"].startswith("two-panel-16")
    assert prov["target_frames"] == [11, 21, 31, 41, 51, 61]
    assert 0.0 <= prov["fit_rmse_m"] < 0.01 and prov["fit_max_error_m"] >= prov["fit_rmse_m"]
    assert prov["fit_seconds"] > 0 and prov["start"].startswith("Cotton")
    assert set(prov["fit_parameters"]) <= set(p.values)
    # mass is the measured areal density, the same in reference and preset
    assert p.values["mass"] == prov["reference_values"]["mass"]
    assert p.values["compression_stiffness"] == p.values["tension_stiffness"]  # tied in the fit
    assert p.notes


def test_read_blender_cloth_preset_never_runs_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = tmp_path / "Evil.py"
    evil.write_text(
        f"import bpy\nbpy.context.cloth.settings.mass = 1\nopen({str(marker)!r}, 'w').write('x')\n"
    )
    with pytest.raises(pr.PresetError, match="unexpected statement at line 3"):
        addon_presets.read_blender_cloth_preset(evil)
    evil.write_text(f"import bpy\nbpy.context.cloth.settings.mass = open({str(marker)!r}, 'w')\n")
    with pytest.raises(ValueError):  # not a literal: ast.literal_eval refuses
        addon_presets.read_blender_cloth_preset(evil)
    assert not marker.exists()


def test_find_preset_for_batch() -> None:
    denim = pr.find_preset("denim")  # case-insensitive
    assert denim.name == "Denim" and denim.builtin
    assert denim.values["tension_stiffness"] == 40.0 and denim.quality == 12
    assert denim.parameters == {k: denim.values[k] for k in PARAMETER_NAMES if k in denim.values}
    assert "quality" not in denim.parameters
    with pytest.raises(pr.PresetError, match="no preset named 'Tweed'; available: .*Denim"):
        pr.find_preset("Tweed")


# ---------------------------------------------------------------------------- parsing


def test_parse_round_trip() -> None:
    p = pr.parse_preset(good_text(), "test.json")
    assert p.name == "Test Cloth" and p.values["quality"] == 6 and p.values["mass"] == 0.4
    assert isinstance(p.values["tension_stiffness"], float) and p.notes.endswith("two lines")
    again = pr.parse_preset(pr.preset_to_json(p), "again.json")
    assert again == p
    # values are written in a fixed order: quality first, then PARAMETER_NAMES
    keys = list(json.loads(pr.preset_to_json(p))["values"])
    assert keys == [k for k in pr.VALUE_KEYS if k in p.values]


def test_parse_accepts_bounds_and_minimal_preset() -> None:
    lo_hi = {k: hi for k, (lo, hi) in PARAMETER_BOUNDS.items()}
    lo_hi["mass"] = 1e-6
    p = pr.parse_preset(json.dumps({"schema": 1, "name": "x", "model": "blender_cloth", "values": lo_hi}))
    assert p.values["tension_stiffness"] == 10000.0 and p.notes == "" and p.provenance == {}
    zero = pr.parse_preset(
        json.dumps(
            {
                "schema": 1,
                "name": "z",
                "model": "blender_cloth",
                "values": {"tension_damping": 0, "quality": 80},
            }
        )
    )
    assert zero.values == {"quality": 80, "tension_damping": 0.0}


BAD_TEXTS = {
    "malformed JSON": ('{"schema": 1, "name": "x",', "not valid JSON"),
    "trailing garbage": (good_text() + " x", "not valid JSON"),
    "python code": ("import os\nos.system('echo hi')\n", "not valid JSON"),
    "top-level array": ("[1, 2]", "must be a JSON object"),
    "unknown top-level key": (good_text(script="print(1)"), "unknown key\\(s\\) 'script'"),
    "missing values": (json.dumps({"schema": 1, "name": "x", "model": "blender_cloth"}), "missing key"),
    "unknown value key": (with_values(use_pressure=1), "unknown key\\(s\\) in values: 'use_pressure'"),
    "values not an object": (good_text(values=[1, 2]), "values must be an object"),
    "empty values": (good_text(values={}), "values is empty"),
    "string value": (with_values(mass="0.3"), "values.mass must be a number"),
    "bool value": (with_values(tension_stiffness=True), "values.tension_stiffness must be a number"),
    "null value": (with_values(shear_stiffness=None), "values.shear_stiffness must be a number"),
    "list value": (with_values(shear_stiffness=[1]), "values.shear_stiffness must be a number"),
    "NaN": (with_values(mass=0.3).replace("0.3", "NaN"), "NaN is not allowed"),
    "Infinity": (with_values(mass=0.3).replace("0.3", "Infinity"), "Infinity is not allowed"),
    "-Infinity": (with_values(mass=0.3).replace("0.3", "-Infinity"), "Infinity is not allowed"),
    "overflowing float": (with_values(mass=0.3).replace("0.3", "1e999"), "values.mass is not a finite"),
    "huge int": (with_values(mass=0.3).replace("0.3", "9" * 400), "values.mass = 9+ is not a finite"),
    "above Blender's max": (with_values(tension_stiffness=10001), "tension_stiffness = 10001 is outside"),
    "negative": (with_values(bending_damping=-1), "bending_damping = -1 is outside"),
    "air damping too high": (with_values(air_damping=11), "air_damping = 11 is outside"),
    "zero mass": (with_values(mass=0), "mass must be > 0"),
    "fractional quality": (with_values(quality=5.5), "quality must be an integer"),
    "float quality": (with_values(quality=5.0), "quality must be an integer"),
    "zero quality": (with_values(quality=0), "quality = 0 is outside"),
    "huge quality": (with_values(quality=100000), "quality = 100000 is outside"),
    "bool quality": (with_values(quality=True), "quality must be an integer"),
    "empty name": (good_text(name=""), "name is empty"),
    "blank name": (good_text(name="   "), "name is empty"),
    "name too long": (good_text(name="x" * 65), "65 characters long, at most 64"),
    "name with slash": (good_text(name="cloth/../../evil"), "contains a path separator"),
    "name with backslash": (good_text(name="..\\evil"), "contains a path separator"),
    "name is ..": (good_text(name=".."), "contains '..'"),
    "name with ..": (good_text(name="a..b"), "contains '..'"),
    "name with NUL": (good_text(name="a\u0000b"), "control or invisible"),
    "name with newline": (good_text(name="a\nb"), "control or invisible"),
    "name with bidi override": (good_text(name="abc\u202exyz"), "control or invisible"),
    "name with outer space": (good_text(name=" Silk"), "starts or ends with white space"),
    "name not a string": (good_text(name=5), "name must be a string"),
    "schema 2": (good_text(schema=2), "schema 2 is not supported"),
    "schema true": (good_text(schema=True), "schema true is not supported"),
    "other model": (good_text(model="vbd"), 'model "vbd" is not supported'),
    "duplicate key": (
        '{"schema": 1, "schema": 1, "name": "x", "model": "blender_cloth", "values": {"mass": 1}}',
        "duplicate key 'schema'",
    ),
    "notes not text": (good_text(notes=["x"]), "notes must be a string"),
    "notes with control chars": (good_text(notes="a\u0007b"), "notes contains control characters"),
    "notes too long": (good_text(notes="x" * 5000), "notes is 5000 characters long"),
    "provenance unknown key": (good_text(provenance={"cmd": "rm -rf /"}), "unknown key\\(s\\) in provenance"),
    "provenance not object": (good_text(provenance="x"), "provenance must be an object"),
    "provenance negative rmse": (
        good_text(provenance={"fit_rmse_m": -1}),
        "provenance.fit_rmse_m must be >= 0",
    ),
    "provenance frames": (good_text(provenance={"target_frames": [1, "2"]}), "must contain integers only"),
    "provenance bad reference": (
        good_text(provenance={"reference_values": {"mass": -1}}),
        "mass = -1 is outside",
    ),
    "provenance lab number not a number": (
        good_text(provenance={"lab_numbers": {"weight_gsm": "heavy"}}),
        "provenance.lab_numbers.weight_gsm must be a number",
    ),
    "provenance readings not an object": (
        good_text(provenance={"rig_readings": [1.0]}),
        "provenance.rig_readings must be an object of at most 64 named numbers",
    ),
    "deep nesting": (
        '{"schema": 1, "name": "x", "model": "blender_cloth", "notes": ' + "[" * 20000 + "]" * 20000 + "}",
        "not valid JSON",
    ),
}


@pytest.mark.parametrize("case", list(BAD_TEXTS))
def test_parse_rejects(case: str) -> None:
    text, message = BAD_TEXTS[case]
    with pytest.raises(pr.PresetError, match=message) as info:
        pr.parse_preset(text, "shared/bad.json")
    assert str(info.value).startswith("preset shared/bad.json: ")  # names the file
    assert isinstance(info.value, ValueError)


def test_name_with_python_code_is_only_text(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    name = "__import__('os').system('touch pwned')"
    p = pr.parse_preset(good_text(name=name), "x.json")
    assert p.name == name
    filename = pr.safe_filename(name)
    assert filename == "import___os_system_touch_pwned.json"
    path = pr.save_preset_file(p, tmp_path)
    assert path.parent == tmp_path.resolve() and pr.load_preset_file(path).name == name
    assert not marker.exists() and not (Path.cwd() / "pwned").exists() and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    ("name", "filename"),
    [
        ("Jersey Knit", "jersey_knit.json"),
        ("PVC", "pvc.json"),
        ("Wool Felt (3 mm)", "wool_felt_3_mm.json"),
        ("Ärmel-Stoff", "armel-stoff.json"),
        ("...", "preset.json"),
        ("日本", "preset.json"),
        ("CON", "con_.json"),
        ("a" * 80, "a" * 64 + ".json"),
    ],
)
def test_safe_filename(name: str, filename: str) -> None:
    assert pr.safe_filename(name) == filename
    assert "/" not in filename and "\\" not in filename and ".." not in filename


# ---------------------------------------------------------------------------- files


def test_large_file_rejected_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the size check answers from stat alone: a file too large is never opened, so its size
    # costs neither time nor memory
    opened: list[Path] = []
    real_open = open

    def recording_open(path, *args, **kwargs):
        opened.append(Path(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(pr_files, "open", recording_open, raising=False)
    big = tmp_path / "big.json"
    big.write_bytes(b'{"schema": 1, "name": "' + b"x" * (10 * 1024 * 1024) + b'"}')
    with pytest.raises(pr.PresetError, match=r"is 10485\d+ bytes, larger than 64 KiB"):
        pr.load_preset_file(big)
    assert opened == []
    # a sparse file of 4 GiB: reading it would take seconds and the memory
    sparse = tmp_path / "sparse.json"
    try:
        with open(sparse, "wb") as f:
            f.truncate(4 << 30)
    except OSError:
        sparse.unlink(missing_ok=True)  # no sparse files here; the 10 MB case above still ran
    else:
        with pytest.raises(pr.PresetError, match="larger than 64 KiB"):
            pr.load_preset_file(sparse)
        assert opened == []
    # the recorder does see the reads of a file within the limit
    small = tmp_path / "small.json"
    small.write_text(good_text())
    assert pr.load_preset_file(small).name == "Test Cloth"
    assert opened == [small]
    with pytest.raises(pr.PresetError, match="larger than 64 KiB"):
        pr.parse_preset("x" * (64 * 1024 + 1), "text")


def test_load_reads_at_most_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even a file whose size the file system reports as small is never read past 64 KiB + 1."""
    path = tmp_path / "growing.json"
    path.write_text(good_text())
    real_stat = Path.stat
    monkeypatch.setattr(
        Path, "stat", lambda self, **kw: os.stat_result((0o100644, 0, 0, 1, 0, 0, 10, 0, 0, 0))
    )
    reads = []
    real_open = open

    class Recorder:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def read(self, n=-1):
            reads.append(n)
            return self.f.read(n)

    monkeypatch.setattr("builtins.open", lambda p, mode="r", *a, **k: Recorder(real_open(p, mode, *a, **k)))
    assert pr.load_preset_file(path).name == "Test Cloth"
    assert reads == [64 * 1024 + 1]
    monkeypatch.setattr(Path, "stat", real_stat)


def test_load_refuses_other_files(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "preset.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    with pytest.raises(pr.PresetError, match="not a .json file; presets are JSON and are never run"):
        pr.load_preset_file(script)
    disguised = tmp_path / "preset.json"
    disguised.write_text(script.read_text())
    with pytest.raises(pr.PresetError, match="not valid JSON"):
        pr.load_preset_file(disguised)
    assert not marker.exists()
    with pytest.raises(pr.PresetError, match="cannot be read"):
        pr.load_preset_file(tmp_path / "missing.json")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(pr.PresetError, match="not a regular file"):
        pr.load_preset_file(tmp_path / "dir.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes(good_text(notes="cafe").replace("cafe", "caf\u00e9").encode("latin-1"))
    with pytest.raises(pr.PresetError, match="is not UTF-8 text"):
        pr.load_preset_file(latin)


def listing(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def test_save_writes_atomically_inside_the_directory(tmp_path: Path) -> None:
    presets = tmp_path / "presets"
    p = pr.parse_preset(good_text(name="My Silk"))
    path = pr.save_preset_file(p, presets)
    assert path == (presets / "my_silk.json").resolve()
    assert pr.load_preset_file(path).values == p.values
    assert listing(tmp_path) == ["presets", "presets/my_silk.json"]  # no temporary files left
    with pytest.raises(pr.PresetError, match="a preset named 'My Silk' already exists"):
        pr.save_preset_file(pr.parse_preset(good_text(name="my silk")), presets)
    changed = pr.parse_preset(with_values(mass=2.0).replace("Test Cloth", "MY SILK"))
    assert pr.save_preset_file(changed, presets, overwrite=True) == path
    assert pr.load_preset_file(path).values["mass"] == 2.0 and pr.load_preset_file(path).name == "MY SILK"
    with pytest.raises(pr.PresetError, match="a built-in preset has that name"):
        pr.save_preset_file(pr.parse_preset(good_text(name="denim")), presets, reserved=["Denim"])
    # a different name with the same file name gets its own file
    other = pr.save_preset_file(pr.parse_preset(good_text(name="My-Silk!")), presets)
    assert other.name == "my-silk.json"
    third = pr.save_preset_file(pr.parse_preset(good_text(name="my_silk?")), presets)
    assert third.name == "my_silk_2.json"
    assert listing(tmp_path) == [
        "presets",
        "presets/my-silk.json",
        "presets/my_silk.json",
        "presets/my_silk_2.json",
    ]


def test_save_never_leaves_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    presets = tmp_path / "presets"
    presets.mkdir()
    monkeypatch.setattr(pr_files, "safe_filename", lambda name: "../evil.json")
    with pytest.raises(pr.PresetError, match="not inside the presets directory"):
        pr.save_preset_file(pr.parse_preset(good_text()), presets)
    monkeypatch.undo()
    # a preset file that is a symlink to elsewhere is never written through
    outside = tmp_path / "outside.json"
    outside.write_text(good_text(name="Linked"))
    (presets / "linked.json").symlink_to(outside)
    with pytest.raises(pr.PresetError, match="not inside the presets directory"):
        pr.save_preset_file(pr.parse_preset(good_text(name="Linked")), presets, overwrite=True)
    with pytest.raises(pr.PresetError, match="not inside the presets directory"):
        pr.delete_preset_file(pr.load_preset_file(presets / "linked.json"), presets)
    assert outside.read_text() == good_text(name="Linked")
    # Preset objects built in code go through the same checks before anything is written
    bad = pr.Preset(name="../x", values={"mass": 1.0})
    with pytest.raises(pr.PresetError, match="path separator"):
        pr.save_preset_file(bad, presets)
    with pytest.raises(pr.PresetError, match="mass must be > 0"):
        pr.save_preset_file(pr.Preset(name="x", values={"mass": 0.0}), presets)
    with pytest.raises(pr.PresetError, match="has a value that is not a finite number"):
        pr.save_preset_file(pr.Preset(name="x", values={"mass": math.nan}), presets)
    with pytest.raises(pr.PresetError, match="cannot be written as JSON"):
        pr.save_preset_file(pr.Preset(name="x", values={"mass": {1, 2}}), presets)
    with pytest.raises(pr.PresetError, match="values.mass must be a number"):
        pr.save_preset_file(pr.Preset(name="x", values={"mass": "1"}), presets)
    assert listing(tmp_path) == ["outside.json", "presets", "presets/linked.json"]


def test_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = pr.save_preset_file(pr.parse_preset(good_text()), tmp_path)
    before = path.read_text()

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        pr.save_preset_file(pr.parse_preset(with_values(mass=9.0)), tmp_path, overwrite=True)
    assert path.read_text() == before
    assert listing(tmp_path) == [path.name]


def test_list_skips_broken_and_duplicate_user_files(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "b_good.json").write_text(good_text(name="Zebra"))
    (user / "a_good.json").write_text(good_text(name="alpha"))
    (user / "broken.json").write_text("{")
    (user / "shadow.json").write_text(good_text(name="SILK"))
    (user / "twin.json").write_text(good_text(name="Alpha"))
    (user / "notes.txt").write_text("not a preset")
    (user / ".hidden.json").write_text("{")
    warnings: list[str] = []
    presets = pr.list_presets(pr.BUILTIN_DIR, user, warnings)
    names = [p.name for p in presets]
    n_builtin = len(pr.list_presets(pr.BUILTIN_DIR, None))
    assert all(p.builtin for p in presets[:n_builtin]) and names[n_builtin:] == ["alpha", "Zebra"]
    assert names[:n_builtin] == sorted(names[:n_builtin], key=str.casefold)
    assert len(warnings) == 3
    assert any("broken.json: not valid JSON" in w for w in warnings)
    assert any("shadow.json: the name 'SILK' is already used" in w for w in warnings)
    assert any("twin.json: the name 'Alpha' is already used" in w for w in warnings)
    assert pr.find_preset("zebra", user).path == user / "b_good.json"
    assert pr.find_preset("silk", user).builtin  # built-ins win
    assert pr.list_presets(pr.BUILTIN_DIR, tmp_path / "missing") == pr.list_presets(pr.BUILTIN_DIR, None)


def test_rename_and_delete_user_presets_only(tmp_path: Path) -> None:
    path = pr.save_preset_file(pr.parse_preset(good_text(name="Old")), tmp_path)
    old = pr.load_preset_file(path)
    new_path = pr.rename_preset_file(old, "New Name", tmp_path)
    assert new_path.name == "new_name.json" and not path.exists()
    renamed = pr.load_preset_file(new_path)
    assert renamed.name == "New Name" and renamed.values == old.values and renamed.notes == old.notes
    assert pr.rename_preset_file(renamed, "NEW NAME", tmp_path) == new_path  # case only
    with pytest.raises(pr.PresetError, match="contains '..'"):
        pr.rename_preset_file(pr.load_preset_file(new_path), "..", tmp_path)
    with pytest.raises(pr.PresetError, match="a built-in preset has that name"):
        pr.rename_preset_file(pr.load_preset_file(new_path), "Cotton", tmp_path, reserved=["Cotton"])
    cotton = pr.find_preset("Cotton")
    with pytest.raises(pr.PresetError, match="cannot rename 'Cotton': it is a built-in preset"):
        pr.rename_preset_file(cotton, "Mine", pr.BUILTIN_DIR)
    with pytest.raises(pr.PresetError, match="cannot delete 'Cotton': it is a built-in preset"):
        pr.delete_preset_file(cotton, pr.BUILTIN_DIR)
    foreign = pr.load_preset_file(new_path)
    with pytest.raises(pr.PresetError, match="not inside the presets directory"):
        pr.delete_preset_file(foreign, tmp_path / "elsewhere")
    pr.delete_preset_file(foreign, tmp_path)
    assert listing(tmp_path) == []
    assert (pr.BUILTIN_DIR / "cotton.json").is_file()


def test_preset_from_fit_result() -> None:
    result = {
        "model": "blender_cloth",
        "params": {"tension_stiffness": 31.5, "compression_stiffness": 31.5, "bending_stiffness": 2.25},
        "initial_params": {"tension_stiffness": 15.0},
        "rmse_m": 0.0042,
        "max_error_m": 0.011,
        "target_frames": [12, 24],
        "blend_file": "/scenes/shirt.blend",
        "date": "2026-11-30T10:00:00",
        "device": "cuda:0",
        "addon_version": "0.1.0",
        "object": "Shirt",
        "iterations": 9,
    }
    base = {"quality": 7, "mass": 0.25, "tension_stiffness": 15.0, "pin_stiffness": 1.0}
    p = addon_presets.preset_from_fit_result("Shirt Fitted", result, base, notes="from the shoot")
    assert p.values == {
        "quality": 7,
        "mass": 0.25,
        "tension_stiffness": 31.5,
        "compression_stiffness": 31.5,
        "bending_stiffness": 2.25,
        "pin_stiffness": 1.0,
    }
    assert p.provenance == {
        "source_blend": "/scenes/shirt.blend",
        "object": "Shirt",
        "target_frames": [12, 24],
        "fit_rmse_m": 0.0042,
        "fit_max_error_m": 0.011,
        "date": "2026-11-30T10:00:00",
        "addon_version": "0.1.0",
        "device": "cuda:0",
        "fit_parameters": ["tension_stiffness", "compression_stiffness", "bending_stiffness"],
    }
    assert pr.parse_preset(pr.preset_to_json(p)) == p
    # settings the fit ran with instead of the modifier's (a preset as start) come before the fitted ones
    started = dict(
        result, start_values={"quality": 12, "mass": 1.0, "tension_stiffness": 40.0, "time_scale": 1.0}
    )
    p2 = addon_presets.preset_from_fit_result("Shirt Fitted", started, base)
    assert p2.values["quality"] == 12 and p2.values["mass"] == 1.0 and p2.values["tension_stiffness"] == 31.5
    assert "time_scale" not in p2.values
    with pytest.raises(pr.PresetError, match="the 'fluid' model; presets hold settings of 'blender_cloth'"):
        addon_presets.preset_from_fit_result("x", dict(result, model="fluid"))
    # a soft-body result does not take cloth settings
    with pytest.raises(pr.PresetError, match="do not know: tension_stiffness"):
        addon_presets.preset_from_fit_result("x", dict(result, model="soft_body"))
    with pytest.raises(pr.PresetError, match="no fitted parameters"):
        addon_presets.preset_from_fit_result("x", dict(result, params={}))
    with pytest.raises(pr.PresetError, match="do not know: friction"):
        addon_presets.preset_from_fit_result("x", dict(result, params={"friction": 1.0}))
    with pytest.raises(pr.PresetError, match="outside Blender's range"):
        addon_presets.preset_from_fit_result("x", dict(result, params={"air_damping": 50.0}))
    with pytest.raises(pr.PresetError, match="path separator"):
        addon_presets.preset_from_fit_result("a/b", result)
