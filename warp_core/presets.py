"""Material presets: small JSON files of ``ClothSettings`` values, never executed.

A preset file::

    {
      "schema": 1,
      "name": "Denim",
      "model": "blender_cloth",
      "values": {"quality": 12, "mass": 1.0, "tension_stiffness": 40.0, ...},
      "notes": "optional free text",
      "provenance": {"source_blend": "...", "target_frames": [11, 21], "fit_rmse_m": 0.002, ...}
    }

``values`` holds any subset of the fields the ``blender_cloth`` model knows: the continuous
parameters of :data:`~.params.PARAMETER_NAMES` (floats within Blender's hard limits, mass
> 0) and ``quality`` (an integer, 1 to 80: substeps per frame, which fitted stiffness values
depend on). Fields a preset leaves out are left alone when it is applied.

Everything read from disk is validated strictly: the size is checked before reading
(64 KiB at most), then the JSON (no NaN/Infinity, no duplicate keys), every key and every
value. Each rejection is a :class:`PresetError` naming the file and the problem. Writing
goes through a temporary file and ``os.replace`` and never leaves the target directory.

No bpy here: the add-on's menus and operators (``addon/presets.py``) and the batch
command call these functions.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import os
import re
import tempfile
import unicodedata
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import UserError
from .models.blender_cloth.params import PARAMETER_BOUNDS, PARAMETER_NAMES

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MODEL = "blender_cloth"
MAX_FILE_BYTES = 64 * 1024
MAX_NAME_LENGTH = 64
MAX_NOTES_LENGTH = 4000
MAX_TEXT_LENGTH = 1024  # provenance strings
MAX_LIST_LENGTH = 10000  # provenance lists (target frames, parameter names)
PRESET_SUFFIX = ".json"

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "assets" / "presets"

QUALITY_RANGE = (1, 80)  # Blender's quality slider; larger values make a preset a trap
VALUE_KEYS: tuple[str, ...] = ("quality", *PARAMETER_NAMES)
"""Keys allowed in ``values``, in the order they are written."""

TOP_LEVEL_KEYS = ("schema", "name", "model", "values", "notes", "provenance")
REQUIRED_KEYS = ("schema", "name", "model", "values")

# provenance key -> kind of value
PROVENANCE_KEYS: dict[str, str] = {
    "source_blend": "text",
    "object": "text",
    "target_frames": "frames",
    "fit_rmse_m": "length",
    "fit_max_error_m": "length",
    "fit_seconds": "length",
    "date": "text",
    "addon_version": "text",
    "device": "text",
    "drape_test": "text",
    "start": "text",
    "fit_parameters": "names",
    "reference_values": "values",
}


class PresetError(UserError, ValueError):
    """A preset that cannot be read, written or used; the message names the file and the problem."""


@dataclass(frozen=True)
class Preset:
    """One material preset. ``values`` maps ``ClothSettings`` field names to numbers
    (``quality`` an int, the rest floats). ``builtin`` presets ship with the add-on and
    cannot be renamed or deleted; ``path`` is the file it was read from, if any."""

    name: str
    values: dict[str, float]
    notes: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    model: str = MODEL
    builtin: bool = False
    path: Path | None = None

    @property
    def parameters(self) -> dict[str, float]:
        """The continuous parameters only (what a fit can start from), ``PARAMETER_NAMES`` order."""
        return {k: float(self.values[k]) for k in PARAMETER_NAMES if k in self.values}

    @property
    def quality(self) -> int | None:
        q = self.values.get("quality")
        return None if q is None else int(q)

    def to_dict(self) -> dict[str, Any]:
        """The file's content (without ``builtin`` and ``path``, which are not stored)."""
        d: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "name": self.name,
            "model": self.model,
            "values": {k: self.values[k] for k in VALUE_KEYS if k in self.values},
        }
        if self.notes:
            d["notes"] = self.notes
        if self.provenance:
            d["provenance"] = dict(self.provenance)
        return d


# ---------------------------------------------------------------------------- validation


def _fail(source: str, problem: str) -> PresetError:
    return PresetError(f"preset {source}: {problem}")


def _has_control(text: str) -> bool:
    return any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") for c in text)


def check_name(name: Any, source: str = "(new preset)") -> str:
    """Return ``name`` if it is a valid preset name, else raise :class:`PresetError`."""
    if not isinstance(name, str):
        raise _fail(source, f"name must be a string, got {type(name).__name__}")
    if not name.strip():
        raise _fail(source, "name is empty")
    if len(name) > MAX_NAME_LENGTH:
        raise _fail(source, f"name is {len(name)} characters long, at most {MAX_NAME_LENGTH} are allowed")
    if name != name.strip():
        raise _fail(source, f"name {name!r} starts or ends with white space")
    if "/" in name or "\\" in name:
        raise _fail(source, f"name {name!r} contains a path separator")
    if ".." in name:
        raise _fail(source, f"name {name!r} contains '..'")
    if _has_control(name):
        raise _fail(source, f"name {name!r} contains control or invisible characters")
    return name


def _number(key: str, value: Any, source: str, where: str = "values") -> float:
    # bool is an int subclass: true/false are not numbers here
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(source, f"{where}.{key} must be a number, got {json.dumps(value)[:40]}")
    try:
        number = float(value)
    except OverflowError:
        raise _fail(source, f"{where}.{key} = {str(value)[:40]} is not a finite number") from None
    if not math.isfinite(number):
        raise _fail(source, f"{where}.{key} is not a finite number")
    return number


def _check_values(values: Any, source: str, where: str = "values") -> dict[str, float]:
    if not isinstance(values, dict):
        raise _fail(source, f"{where} must be an object of field: number, got {type(values).__name__}")
    if not values:
        raise _fail(source, f"{where} is empty: a preset sets at least one cloth setting")
    unknown = [k for k in values if k not in VALUE_KEYS]
    if unknown:
        raise _fail(
            source,
            f"unknown key(s) in {where}: {', '.join(repr(k) for k in unknown)}; "
            f"known cloth settings: {', '.join(VALUE_KEYS)}",
        )
    out: dict[str, float] = {}
    for key in VALUE_KEYS:
        if key not in values:
            continue
        raw = values[key]
        if key == "quality":
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise _fail(source, f"{where}.quality must be an integer, got {json.dumps(raw)[:40]}")
            lo, hi = QUALITY_RANGE
            if not lo <= raw <= hi:
                raise _fail(source, f"{where}.quality = {raw} is outside [{lo}, {hi}]")
            out[key] = raw
            continue
        number = _number(key, raw, source, where)
        lo, hi = PARAMETER_BOUNDS[key]
        if not lo <= number <= hi:
            raise _fail(source, f"{where}.{key} = {number:g} is outside Blender's range [{lo:g}, {hi:g}]")
        if key == "mass" and number <= 0.0:
            raise _fail(source, f"{where}.mass must be > 0, got {number:g}")
        out[key] = number
    return out


def _check_text(key: str, value: Any, source: str, limit: int, multiline: bool = False) -> str:
    if not isinstance(value, str):
        raise _fail(source, f"{key} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise _fail(source, f"{key} is {len(value)} characters long, at most {limit} are allowed")
    text = value.replace("\n", "").replace("\t", "") if multiline else value
    if _has_control(text):
        raise _fail(source, f"{key} contains control characters")
    return value


def _check_provenance(prov: Any, source: str) -> dict[str, Any]:
    if not isinstance(prov, dict):
        raise _fail(source, f"provenance must be an object, got {type(prov).__name__}")
    unknown = [k for k in prov if k not in PROVENANCE_KEYS]
    if unknown:
        raise _fail(
            source,
            f"unknown key(s) in provenance: {', '.join(repr(k) for k in unknown)}; "
            f"known: {', '.join(PROVENANCE_KEYS)}",
        )
    out: dict[str, Any] = {}
    for key, kind in PROVENANCE_KEYS.items():
        if key not in prov:
            continue
        value = prov[key]
        where = f"provenance.{key}"
        if kind == "text":
            out[key] = _check_text(where, value, source, MAX_TEXT_LENGTH)
        elif kind == "length":
            number = _number(key, value, source, "provenance")
            if number < 0.0:
                raise _fail(source, f"{where} must be >= 0, got {number:g}")
            out[key] = number
        elif kind == "frames":
            if not isinstance(value, list) or len(value) > MAX_LIST_LENGTH:
                raise _fail(source, f"{where} must be a list of frame numbers")
            if any(isinstance(f, bool) or not isinstance(f, int) for f in value):
                raise _fail(source, f"{where} must contain integers only")
            out[key] = list(value)
        elif kind == "names":
            if not isinstance(value, list) or len(value) > MAX_LIST_LENGTH:
                raise _fail(source, f"{where} must be a list of parameter names")
            bad = [n for n in value if n not in VALUE_KEYS]
            if bad:
                raise _fail(source, f"{where} has unknown parameter(s) {', '.join(map(repr, bad))}")
            out[key] = list(value)
        else:  # values
            out[key] = _check_values(value, source, where)
    return out


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not allowed (numbers must be finite)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for key, value in pairs:
        if key in d:
            raise ValueError(f"duplicate key {key!r}")
        d[key] = value
    return d


def parse_preset(text: str, source: str = "<string>", builtin: bool = False) -> Preset:
    """Validate and parse a preset's JSON text. ``source`` (the file) appears in every error."""
    if not isinstance(text, str):
        raise _fail(source, "content must be text")
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise _fail(source, f"larger than {MAX_FILE_BYTES // 1024} KiB; not a preset")
    try:
        data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as e:
        raise _fail(source, f"not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise _fail(source, f"must be a JSON object, got {type(data).__name__}")
    unknown = [k for k in data if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise _fail(
            source,
            f"unknown key(s) {', '.join(repr(k) for k in unknown)}; known: {', '.join(TOP_LEVEL_KEYS)}",
        )
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise _fail(source, f"missing key(s) {', '.join(repr(k) for k in missing)}")
    schema = data["schema"]
    if isinstance(schema, bool) or schema != SCHEMA_VERSION or not isinstance(schema, int):
        raise _fail(
            source, f"schema {json.dumps(schema)[:40]} is not supported (this version reads schema 1)"
        )
    if data["model"] != MODEL:
        raise _fail(source, f"model {json.dumps(data['model'])[:60]} is not supported (expected {MODEL!r})")
    name = check_name(data["name"], source)
    values = _check_values(data["values"], source)
    notes = _check_text("notes", data.get("notes", ""), source, MAX_NOTES_LENGTH, multiline=True)
    provenance = _check_provenance(data.get("provenance", {}), source)
    return Preset(name=name, values=values, notes=notes, provenance=provenance, builtin=builtin)


def validate_preset(preset: Preset, source: str | None = None) -> Preset:
    """Run a :class:`Preset` built in code through the same checks as a file (returns a
    normalized copy)."""
    try:
        text = json.dumps(preset.to_dict(), allow_nan=False)
    except ValueError:
        raise _fail(source or repr(preset.name), "has a value that is not a finite number") from None
    except TypeError as e:
        raise _fail(source or repr(preset.name), f"cannot be written as JSON ({e})") from None
    checked = parse_preset(text, source or repr(preset.name), builtin=preset.builtin)
    return replace(checked, path=preset.path)


def preset_to_json(preset: Preset) -> str:
    """The file content of ``preset`` (validated; keys in a fixed order; ends with a newline)."""
    checked = validate_preset(preset)
    return json.dumps(checked.to_dict(), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------- files

_WINDOWS_RESERVED = {
    "con",
    "prn",
    "aux",
    "nul",
    *(f"com{i}" for i in range(10)),
    *(f"lpt{i}" for i in range(10)),
}


def safe_filename(name: str) -> str:
    """A portable file name for a preset called ``name``: lower-case ASCII letters, digits,
    ``_`` and ``-``, ending in ``.json`` (e.g. ``"Jersey knit"`` -> ``"jersey_knit.json"``)."""
    ascii_name = unicodedata.normalize("NFKD", str(name)).encode("ascii", "ignore").decode("ascii")
    stem = re.sub(r"[^a-z0-9_-]+", "_", ascii_name.lower()).strip("_-")[:MAX_NAME_LENGTH] or "preset"
    if stem in _WINDOWS_RESERVED:
        stem += "_"
    return stem + PRESET_SUFFIX


def load_preset_file(path: str | os.PathLike[str], builtin: bool = False) -> Preset:
    """Read and validate one preset file. The size is checked before reading, and at most
    64 KiB + 1 byte is ever read, whatever the file claims to be."""
    p = Path(path)
    source = str(p)
    if p.suffix.lower() != PRESET_SUFFIX:
        raise _fail(source, f"not a {PRESET_SUFFIX} file; presets are JSON and are never run")
    try:
        st = p.stat()
    except OSError as e:
        raise _fail(source, f"cannot be read ({e.strerror or e})") from None
    if not p.is_file():
        raise _fail(source, "is not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise _fail(source, f"is {st.st_size} bytes, larger than {MAX_FILE_BYTES // 1024} KiB; not a preset")
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise _fail(source, f"cannot be read ({e.strerror or e})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise _fail(source, f"larger than {MAX_FILE_BYTES // 1024} KiB; not a preset")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _fail(source, f"is not UTF-8 text ({e.reason} at byte {e.start})") from None
    return replace(parse_preset(text, source, builtin=builtin), path=p)


def _inside(directory: Path, path: Path) -> Path:
    """``path`` resolved, if it lies directly in ``directory`` (resolved); else PresetError."""
    base = directory.resolve()
    target = (path if path.is_absolute() else base / path).resolve()
    if target.parent != base:
        raise PresetError(f"refusing to write {path}: not inside the presets directory {base}")
    return target


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_preset_json(preset: Preset, path: str | os.PathLike[str]) -> Path:
    """Write ``preset`` to exactly ``path`` (an export the user chose), atomically."""
    text = preset_to_json(preset)
    p = Path(path)
    if p.suffix.lower() != PRESET_SUFFIX:
        p = p.with_name(p.name + PRESET_SUFFIX)
    if not p.parent.is_dir():
        raise PresetError(f"cannot export preset {preset.name!r}: folder {p.parent} does not exist")
    _atomic_write(p, text)
    return p


def _read_dir(directory: Path, builtin: bool, warnings: list[str] | None) -> list[Preset]:
    out: list[Preset] = []
    try:
        entries = sorted(directory.iterdir(), key=lambda e: e.name)
    except OSError:
        return out
    for entry in entries:
        if entry.name.startswith(".") or entry.suffix.lower() != PRESET_SUFFIX or not entry.is_file():
            continue
        try:
            out.append(load_preset_file(entry, builtin=builtin))
        except PresetError as e:
            message = f"skipped {e}"
            log.warning(message)
            if warnings is not None:
                warnings.append(message)
    return out


def _key(name: str) -> str:
    return name.casefold()


def list_presets(
    builtin_dir: str | os.PathLike[str] | None = BUILTIN_DIR,
    user_dir: str | os.PathLike[str] | None = None,
    warnings: list[str] | None = None,
) -> list[Preset]:
    """Built-in presets (sorted by name) then user presets (sorted by name).

    A file that cannot be read, or a user preset whose name (case-insensitive) is already
    taken, is skipped; a message is appended to ``warnings`` (and logged) instead of raising.
    """
    builtins = _read_dir(Path(builtin_dir), True, warnings) if builtin_dir is not None else []
    users = _read_dir(Path(user_dir), False, warnings) if user_dir is not None else []
    seen: set[str] = set()
    out: list[Preset] = []
    for group in (builtins, users):
        kept = []
        for p in group:
            if _key(p.name) in seen:
                message = f"skipped preset {p.path}: the name {p.name!r} is already used by another preset"
                log.warning(message)
                if warnings is not None:
                    warnings.append(message)
                continue
            seen.add(_key(p.name))
            kept.append(p)
        out += sorted(kept, key=lambda p: _key(p.name))
    return out


_default_user_dir: Callable[[], Path | None] | None = None


def set_default_user_dir(provider: Callable[[], Path | None] | None) -> None:
    """Where :func:`find_preset` looks for user presets when it is given no ``user_dir``
    (the add-on sets its user presets folder while it is registered)."""
    global _default_user_dir
    _default_user_dir = provider


def find_preset(
    name: str,
    user_dir: str | os.PathLike[str] | None = None,
    builtin_dir: str | os.PathLike[str] | None = BUILTIN_DIR,
) -> Preset:
    """The preset called ``name`` (case-insensitive), built-ins first. PresetError if none.

    Without ``user_dir``, user presets come from the folder set by
    :func:`set_default_user_dir` (none outside Blender)."""
    if user_dir is None and _default_user_dir is not None:
        user_dir = _default_user_dir()
    presets = list_presets(builtin_dir, user_dir)
    for p in presets:
        if _key(p.name) == _key(str(name)):
            return p
    available = ", ".join(p.name for p in presets) or "none"
    raise PresetError(f"no preset named {name!r}; available: {available}")


def save_preset_file(
    preset: Preset,
    directory: str | os.PathLike[str],
    overwrite: bool = False,
    reserved: Collection[str] = (),
) -> Path:
    """Write ``preset`` into ``directory`` (created if missing) as ``safe_filename(name)``.

    A preset of the same name (case-insensitive) already in the directory is replaced
    only with ``overwrite``; ``reserved`` names (the built-ins) are refused. When the file
    name is taken by a different preset, ``_2``, ``_3``, ... is appended. The write is
    atomic and never leaves ``directory``. Returns the file written.
    """
    text = preset_to_json(preset)
    name = preset.name
    if _key(name) in {_key(r) for r in reserved}:
        raise PresetError(f"cannot save preset {name!r}: a built-in preset has that name; choose another")
    base = Path(directory)
    base.mkdir(parents=True, exist_ok=True)
    base = base.resolve()
    existing = {_key(p.name): p for p in _read_dir(base, False, None)}
    same = existing.get(_key(name))
    if same is not None and same.path is not None:
        if not overwrite:
            raise PresetError(f"a preset named {same.name!r} already exists ({same.path}); not overwritten")
        target = _inside(base, same.path)
    else:
        filename = safe_filename(name)
        target = _inside(base, base / filename)
        stem = filename[: -len(PRESET_SUFFIX)]
        k = 2
        while target.exists():
            target = _inside(base, base / f"{stem}_{k}{PRESET_SUFFIX}")
            k += 1
    _atomic_write(target, text)
    return target


def _user_file(preset: Preset, directory: str | os.PathLike[str], action: str) -> Path:
    if preset.builtin:
        raise PresetError(f"cannot {action} {preset.name!r}: it is a built-in preset")
    if preset.path is None:
        raise PresetError(f"cannot {action} {preset.name!r}: it has no file")
    return _inside(Path(directory), Path(preset.path))


def delete_preset_file(preset: Preset, directory: str | os.PathLike[str]) -> None:
    """Delete a user preset's file (refuses built-ins and files outside ``directory``)."""
    path = _user_file(preset, directory, "delete")
    try:
        path.unlink()
    except FileNotFoundError:
        raise PresetError(f"cannot delete {preset.name!r}: {path} no longer exists") from None


def rename_preset_file(
    preset: Preset, new_name: str, directory: str | os.PathLike[str], reserved: Collection[str] = ()
) -> Path:
    """Rename a user preset: writes it under the new name, then removes the old file."""
    old = _user_file(preset, directory, "rename")
    check_name(new_name, repr(new_name))
    renamed = replace(preset, name=new_name, path=None)
    if _key(new_name) == _key(preset.name):  # only the case changes: rewrite in place
        _atomic_write(old, preset_to_json(renamed))
        return old
    path = save_preset_file(renamed, directory, overwrite=False, reserved=reserved)
    if path != old:
        old.unlink(missing_ok=True)
    return path


# ---------------------------------------------------------------------------- building presets

# fit result summary key -> provenance key
_RESULT_PROVENANCE = {
    "blend_file": "source_blend",
    "object": "object",
    "target_frames": "target_frames",
    "rmse_m": "fit_rmse_m",
    "max_error_m": "fit_max_error_m",
    "seconds": "fit_seconds",
    "date": "date",
    "addon_version": "addon_version",
    "device": "device",
}


def preset_from_fit_result(
    name: str,
    result: dict[str, Any],
    base_values: dict[str, float] | None = None,
    notes: str = "",
) -> Preset:
    """A preset from a fit's summary (``result_json`` of an object, or one object of a batch
    report): ``base_values`` (the object's cloth settings, such as mass and quality, which the
    fitted values only make sense with), overridden by the fit's ``result["start_values"]``
    (settings the fit ran with instead of the modifier's, e.g. from a preset), overridden by
    the fitted ``result["params"]``; provenance from the summary."""
    if not isinstance(result, dict):
        raise PresetError("the fit result is not a JSON object")
    model = result.get("model", MODEL)
    if model != MODEL:
        raise PresetError(f"the fit used the {model!r} model; presets hold {MODEL!r} settings")
    params = result.get("params")
    if not isinstance(params, dict) or not params:
        raise PresetError("the fit result has no fitted parameters")
    values: dict[str, float] = {k: v for k, v in (base_values or {}).items() if k in VALUE_KEYS}
    unknown = [k for k in params if k not in VALUE_KEYS]
    if unknown:
        raise PresetError(f"the fit result has parameter(s) presets do not know: {', '.join(unknown)}")
    start = result.get("start_values") or {}
    if isinstance(start, dict):
        values.update({k: v for k, v in start.items() if k in VALUE_KEYS})
    values.update(params)
    provenance: dict[str, Any] = {}
    for src, dst in _RESULT_PROVENANCE.items():
        value = result.get(src)
        if value is None or value == "":
            continue
        if PROVENANCE_KEYS[dst] == "text":
            value = str(value)[:MAX_TEXT_LENGTH]
        provenance[dst] = value
    provenance["fit_parameters"] = [k for k in VALUE_KEYS if k in params]
    return validate_preset(
        Preset(name=name, values=values, notes=notes, provenance=provenance), source=repr(name)
    )


def read_blender_cloth_preset(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings a Blender cloth preset (``presets/cloth/*.py``) assigns, read with ``ast``
    without running it: ``{field: value}`` for each ``bpy.context.cloth.settings.<field> =
    <literal>`` line. Any other statement than ``import bpy`` raises PresetError."""
    p = Path(path)
    if p.stat().st_size > MAX_FILE_BYTES:
        raise _fail(str(p), "too large for a Blender cloth preset")
    tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Import) and [a.name for a in node.names] == ["bpy"]:
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if (
                isinstance(target, ast.Attribute)
                and ast.unparse(target.value) == "bpy.context.cloth.settings"
            ):
                out[target.attr] = ast.literal_eval(node.value)
                continue
        raise _fail(str(p), f"unexpected statement at line {node.lineno}: {ast.unparse(node)[:60]}")
    return out


def blender_preset_values(settings: dict[str, Any]) -> dict[str, float]:
    """The part of a Blender cloth preset's settings that the ``blender_cloth`` model knows."""
    out: dict[str, float] = {}
    for key in VALUE_KEYS:
        if key in settings:
            out[key] = int(settings[key]) if key == "quality" else float(settings[key])
    return out
