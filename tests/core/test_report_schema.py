"""The report's schema (``assets/report.schema.json``): a valid JSON Schema (draft 2020-12)
that declares and describes every key a report, an object's record and the shared entry can
hold, refuses any other, and names exactly the models and parameters there are.

A real report is built here from real fits (a shared fit of two small sheets, whose summaries
are what the batch command's records hold); the reports the batch command itself writes are
checked by ``tests/conftest.py`` after every test that writes one.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from report_schema_check import ReportCheck, is_report, schema_errors
from test_fit import clamped_sheet
from test_shared_fit import hanging, problem

from warp_core.fit import FitResult, FitSettings, fit_shared
from warp_core.fit.verdict.report import json_safe
from warp_core.models import get_model

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO_ROOT / "assets" / "report.schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def registry_models() -> list[str]:
    """The model names of the add-on's registry (``MODEL_CHOICES`` in addon/models/registry.py,
    read without importing it: the add-on needs bpy)."""
    tree = ast.parse((REPO_ROOT / "addon" / "models" / "registry.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "MODEL_CHOICES":
            return [name for _, name, _, _ in ast.literal_eval(node.value)]
    raise AssertionError("addon/models/registry.py has no MODEL_CHOICES")


MODELS = registry_models()


def model_parameters() -> set[str]:
    return {p.name for m in MODELS for p in get_model(m).parameters}


def errors(document: Any) -> list[str]:
    return schema_errors(VALIDATOR, document, limit=50)


def minimal_report(**records: dict[str, Any]) -> dict[str, Any]:
    """A report with one failed record per keyword (name -> extra keys)."""
    objects = [
        {
            "name": name,
            "model": "blender_cloth",
            "status": "failed",
            "error": "a zero-area polygon",
            "params": {},
            "initial_params": {},
            "initial_loss": None,
            "final_loss": None,
            "rmse_m": None,
            "max_error_m": None,
            "iterations": 0,
            "seconds": 0.0,
            "warnings": [],
            **extra,
        }
        for name, extra in records.items()
    ]
    return {
        "version": 1,
        "addon_version": "1.0.0",
        "device": None,
        "blend_file": "/shots/a.blend",
        "saved_to": None,
        "status": "failed",
        "exit_code": 3,
        "date": "2026-01-01T00:00:00+00:00",
        "objects": objects,
    }


# -- the schema itself ---------------------------------------------------------------------------


def _properties(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, schema) of every declared property, at any depth, definitions included."""
    if isinstance(node, dict):
        for name, prop in node.get("properties", {}).items():
            yield f"{where}.{name}", prop
            yield from _properties(prop, f"{where}.{name}")
        for key, value in node.items():
            if key != "properties":
                yield from _properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for value in node:
            yield from _properties(value, where)


def test_the_schema_is_valid_closed_and_describes_every_field() -> None:
    assert SCHEMA["$schema"] == DRAFT_2020_12
    Draft202012Validator.check_schema(SCHEMA)
    defs = SCHEMA["$defs"]
    for where, node in {
        "the report": SCHEMA,
        "a record": defs["object"],
        "the shared entry": defs["shared"],
    }.items():
        assert node.get("additionalProperties") is False, f"{where} accepts undeclared keys"
    # a property that only points at another's (the shared entry's fit summary) shares its text
    undescribed = [
        path
        for path, prop in _properties(SCHEMA)
        if not prop.get("description") and "/properties/" not in prop.get("$ref", "")
    ]
    assert not undescribed, f"properties without a description: {undescribed}"


def test_an_undeclared_key_fails_at_every_level() -> None:
    report = minimal_report(Cloth={})
    assert errors(report) == []
    assert errors({**report, "colour": "red"}), "an unknown top-level key"
    assert errors(minimal_report(Cloth={"colour": "red"})), "an unknown record key"
    shared = {
        "objects": ["A", "B"],
        "params": {"tension_stiffness": 15.0},
        "outcome": "converged",
        "outcome_reason": "matched",
        "undetermined_alone": {"A": [], "B": []},
        "determined_jointly": [],
    }
    assert errors({**report, "shared": shared}) == []
    assert errors({**report, "shared": {**shared, "colour": "red"}}), "an unknown shared key"


def test_the_models_are_the_registrys() -> None:
    assert SCHEMA["$defs"]["object"]["properties"]["model"]["enum"] == MODELS
    for model in MODELS:
        assert errors(minimal_report(Cloth={"model": model})) == [], model
    assert errors(minimal_report(Cloth={"model": "rigid_body"}))


def test_the_values_are_every_models_parameters() -> None:
    names = set(SCHEMA["$defs"]["values"]["propertyNames"]["anyOf"][0]["enum"])
    assert names == model_parameters()
    for model in MODELS:
        values = {p.name: 1.0 for p in get_model(model).parameters}
        record = {"params": values, "initial_params": values, "model": model}
        assert errors(minimal_report(Cloth=record)) == [], model
    for key in ("params", "initial_params"):
        assert errors(minimal_report(Cloth={key: {"stiffness": 1.0}})), key
        # a map region's value: the map kinds a model fits, a region name without ':'
        assert errors(minimal_report(Cloth={key: {"structural:Collar": 1.0}})) == [], key
        assert errors(minimal_report(Cloth={key: {"shrink:Collar": 1.0}})), key
        assert errors(minimal_report(Cloth={key: {"structural:a:b": 1.0}})), key
    pattern = SCHEMA["$defs"]["values"]["propertyNames"]["anyOf"][1]["pattern"]
    kinds = set(pattern.split("(")[1].split(")")[0].split("|"))
    assert kinds == {kind for model in MODELS for kind in get_model(model).map_ranges}


def test_the_fields_of_the_new_batch_contract() -> None:
    """Bad input (exit 2) still writes a report; a farm's runs say where they ran and what
    they applied; any exit status a --misfit-exit can give."""
    refused = {
        **minimal_report(),
        "status": "usage_error",
        "exit_code": 2,
        "blend_file": None,
        "error": "--object Sail: no such object",
        "run": {
            "host": "farm-07",
            "os": "Linux-6.8-x86_64",
            "python": "3.11.7",
            "blender": "5.0.1",
            "warp": None,
            "extension": "1.0.0",
            "command_line": ["shot.blend", "--object", "Sail"],
            "started": "2026-01-01T00:00:00+00:00",
            "seconds": 0.5,
            "threads": None,
            "cuda_visible_devices": None,
            "device_names": {},
        },
    }
    assert errors(refused) == []
    applied = {
        **minimal_report(Cloth={"applied_from": "/results/Cloth.json", "index": 1, "count": 2}),
        "applied": ["/results/Cloth.json"],
        "saved_preset": None,
        "log": "/results/run.jsonl",
        "misfit_exit": 0,
        "exit_code": 17,
    }
    applied["run"] = {**refused["run"], "threads": 4, "device_names": {"cpu": "AMD EPYC"}}
    assert errors(applied) == []
    assert errors({**applied, "exit_code": 256}) and errors({**applied, "misfit_exit": -1})
    assert errors(minimal_report(Cloth={"index": 0}))


# -- real reports --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_fit() -> tuple[list[Any], Any]:
    problems = [problem(clamped_sheet(5), 40.0, [6]), problem(hanging(5), 40.0, [8])]
    return problems, fit_shared(problems, FitSettings(max_iterations=5), names=["Sheet", "Banner"])


def record_of(name: str, fit_problem: Any, result: FitResult, extra: dict[str, Any]) -> dict[str, Any]:
    """An object's record as ``addon/scene/records.py`` (``result_record``) builds it."""
    summary = result.summary()
    return json_safe(
        {
            "name": name,
            "object": name,
            "model": fit_problem.model,
            **summary,
            "warnings": list(summary.get("warnings") or []),
            "status": "cancelled" if result.cancelled else "ok",
            "fit": list(fit_problem.free_parameters),
            "ties": dict(fit_problem.ties),
            "loss": fit_problem.loss_kind,
            "targets": [f"'{name} target' at frame {t.frame}" for t in fit_problem.targets],
            "target_frames": fit_problem.target_frames,
            "start_frame": fit_problem.start_frame,
            "start_values": {},
            "blend_file": "/shots/a.blend",
            "date": "2026-01-01T00:00:00+00:00",
            "device": result.device,
            "addon_version": "1.0.0",
            **extra,
        }
    )


def test_a_report_of_real_fits_validates(shared_fit: tuple[list[Any], Any]) -> None:
    problems, fitted = shared_fit
    names = ["Sheet", "Banner"]
    shared = json_safe(fitted.summary(names))
    records = [
        record_of(n, p, r, {"run_objects": names, "shared": shared, "index": k + 1, "count": 2})
        for k, (n, p, r) in enumerate(zip(names, problems, fitted.members, strict=True))
    ]
    report = {**minimal_report(), "objects": records, "shared": shared, "status": "ok", "exit_code": 0}
    assert errors(report) == []
    # every key is declared where it is (not only allowed by a schema that lets anything through)
    assert _undeclared(report, SCHEMA) == []


def test_every_field_a_fit_summary_can_hold_validates(shared_fit: tuple[list[Any], Any]) -> None:
    """The optional parts of a summary (a gradient, collisions, footage in pixels) and of a
    search (finished by the trust region), on a real result."""
    problems, fitted = shared_fit
    result = fitted.members[0]
    every = dataclasses.replace(
        result,
        gradient="stable",
        n_smoothed=2,
        start_gap=1e-6,
        contacts={"frames": [3, 4], "vertices": 5},
        search={**result.search, "finished_by": "trust_region"},
        unit="px",
        track_errors={"Track": 0.4},
        track_bindings={"Track": {"triangle": [0, 1, 2], "barycentric": [0.2, 0.3, 0.5], "drift_m": 0.01}},
        noise_rmse=0.3,
    )
    footage = {"clip": "shot.mov", "camera": "Camera", "tracks": 1, "markers": 12, "robust_above_px": 3.0}
    geometry = {"tets": 120, "nodes": 60, "cell_size_m": 0.1, "worst_quality": 0.8}
    record = record_of(
        "Sheet", problems[0], every, {"footage": footage, "geometry": geometry, "bake": "c.pc2"}
    )
    assert {"rmse_px", "rounding_gap_px", "start_gap_px", "track_bindings", "contacts"} <= record.keys()
    report = {**minimal_report(), "objects": [record]}
    assert errors(report) == []
    assert _undeclared(report, SCHEMA) == []


def _resolve(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = schema
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _undeclared(
    value: Any, node: dict[str, Any], schema: dict[str, Any] = SCHEMA, where: str = "$"
) -> list[str]:
    """Keys of ``value`` that ``node`` does not declare, where it declares properties."""
    node = _resolve(node, schema)
    found = []
    if isinstance(value, dict) and "properties" in node:
        for key, item in value.items():
            if key not in node["properties"]:
                found.append(f"{where}.{key}")
            else:
                found += _undeclared(item, node["properties"][key], schema, f"{where}.{key}")
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for k, item in enumerate(value):
            found += _undeclared(item, node["items"], schema, f"{where}[{k}]")
    return found


# -- the keys the code writes --------------------------------------------------------------------

# (file, function) -> the schema nodes its dict literals' keys (and ``x["key"] = ...``) belong to
WRITERS = {
    ("warp_core/fit/verdict/result.py", "summary"): ("object", "contacts", "map"),
    ("warp_core/fit/shared.py", "summary"): ("shared",),
    ("addon/scene/records.py", "result_record"): ("object", "footage", "map"),
    ("addon/scene/records.py", "failure_record"): ("object",),
    ("addon/scene/records.py", "input_failure_record"): ("object",),
    ("addon/cli/outputs.py", "report_document"): ("",),
    ("addon/cli/writes.py", "report"): ("",),
    ("addon/cli/run_info.py", "run_info"): ("run",),
    ("warp_core/fit/verdict/build.py", "_search_summary"): ("search",),
    ("warp_core/fit/verdict/identifiability.py", "identifiability"): ("identifiability",),
    ("warp_core/targets/track_reports.py", "binding_records"): ("track_binding",),
    ("warp_core/fit/problem/maps.py", "report"): ("map",),
}


def _written_keys(path: Path, function: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bodies = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    assert bodies, f"{path.relative_to(REPO_ROOT)} has no function {function}: update WRITERS"
    keys = set()
    for body in bodies:
        for n in ast.walk(body):
            if isinstance(n, ast.Dict):
                keys |= {k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                if isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                    keys.add(n.slice.value)
    return keys


def test_every_key_the_code_writes_is_declared() -> None:
    missing = []
    for (path, function), names in WRITERS.items():
        nodes = [SCHEMA if name == "" else SCHEMA["$defs"].get(name, {}) for name in names]
        declared = set().union(*(node.get("properties", {}) for node in nodes))
        undeclared = sorted(_written_keys(REPO_ROOT / path, function) - declared)
        if undeclared:
            missing.append(f"{path}:{function} writes {undeclared}")
    assert not missing, "keys the schema does not declare: " + "; ".join(missing)


# -- the check of every report the tests write (tests/conftest.py) --------------------------------


def test_the_conftest_check_finds_an_invalid_report_once() -> None:
    check = ReportCheck(SCHEMA_PATH)
    # outside pytest's base temp folder, which the check itself walks after this test
    with tempfile.TemporaryDirectory(prefix="report_check_") as where:
        root = Path(where)
        folder = root / "deep" / "er"
        folder.mkdir(parents=True)
        good = folder / "good.json"
        good.write_text(json.dumps(minimal_report(Cloth={})), encoding="utf-8")
        (folder / "preset.json").write_text(json.dumps({"version": 1, "values": {}}), encoding="utf-8")
        (folder / "torn.json").write_bytes(b'{"version": 1, "obj')
        assert check.invalid([root]) == []
        assert is_report(json.loads(good.read_text(encoding="utf-8")))

        bad = folder / "bad.json"
        bad.write_text(json.dumps(minimal_report(Cloth={"colour": "red"})), encoding="utf-8")
        (found,) = check.invalid([root])
        assert str(bad) in found and "colour" in found
        assert check.invalid([root]) == []  # checked once, not after every test
        bad.write_text(json.dumps({**minimal_report(), "shade": 1}), encoding="utf-8")  # rewritten
        (found,) = check.invalid([root])
        assert "shade" in found
