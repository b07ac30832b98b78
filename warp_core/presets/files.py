"""The preset library on disk: one ``.json`` file per preset, built-ins and a user folder.

Files are read with their size checked first and validated by :mod:`.schema`; writes are
atomic (``warp_core.io``) and never leave the target folder. The user presets folder is
always passed in by the caller: the library itself knows only the built-ins.
"""

from __future__ import annotations

import json
import logging
import os
import re
import unicodedata
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

from ..io import atomic_write_text
from .schema import (
    MAX_FILE_BYTES,
    MAX_NAME_LENGTH,
    PRESET_SUFFIX,
    Preset,
    PresetError,
    check_name,
    invalid,
    name_key,
    parse_preset,
    preset_to_json,
)

log = logging.getLogger(__name__)

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "assets" / "presets"

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
        raise invalid(source, f"not a {PRESET_SUFFIX} file; presets are JSON and are never run")
    try:
        st = p.stat()
    except OSError as e:
        raise invalid(source, f"cannot be read ({e.strerror or e})") from None
    if not p.is_file():
        raise invalid(source, "is not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        too_large = f"is {st.st_size} bytes, larger than {MAX_FILE_BYTES // 1024} KiB; not a preset"
        raise invalid(source, too_large)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise invalid(source, f"cannot be read ({e.strerror or e})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise invalid(source, f"larger than {MAX_FILE_BYTES // 1024} KiB; not a preset")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise invalid(source, f"is not UTF-8 text ({e.reason} at byte {e.start})") from None
    return replace(parse_preset(text, source, builtin=builtin), path=p)


def _inside(directory: Path, path: Path) -> Path:
    """``path`` resolved, if it lies directly in ``directory`` (resolved); else PresetError."""
    base = directory.resolve()
    target = (path if path.is_absolute() else base / path).resolve()
    if target.parent != base:
        raise PresetError(f"refusing to write {path}: not inside the presets directory {base}")
    return target


def write_preset_json(preset: Preset, path: str | os.PathLike[str]) -> Path:
    """Write ``preset`` to ``path`` (an export the user chose), atomically; a folder (an
    existing one, or a path ending in a separator) gets ``<folder>/<safe name>.json``."""
    text = preset_to_json(preset)
    p = Path(path)
    if p.is_dir() or str(path).endswith(("/", os.sep)):
        p = p / safe_filename(preset.name)
    elif p.suffix.lower() != PRESET_SUFFIX:
        p = p.with_name(p.name + PRESET_SUFFIX)
    if not p.parent.is_dir():
        raise PresetError(f"cannot export preset {preset.name!r}: folder {p.parent} does not exist")
    atomic_write_text(p, text)
    return p


def _read_dir(
    directory: Path, builtin: bool, warnings: list[str] | None, log_skipped: bool = True
) -> list[Preset]:
    out: list[Preset] = []
    for entry in _preset_files(directory):
        try:
            out.append(load_preset_file(entry, builtin=builtin))
        except PresetError as e:
            message = f"skipped {e}"
            if log_skipped:
                log.warning(message)
            if warnings is not None:
                warnings.append(message)
    return out


def _key(name: str) -> str:
    return name_key(name)


def list_presets(
    builtin_dir: str | os.PathLike[str] | None = BUILTIN_DIR,
    user_dir: str | os.PathLike[str] | None = None,
    warnings: list[str] | None = None,
    *,
    log_skipped: bool = True,
) -> list[Preset]:
    """Built-in presets (sorted by name) then user presets (sorted by name).

    A file that cannot be read, or a user preset whose name (case-insensitive) is already
    taken, is skipped; a message is appended to ``warnings`` (and logged, unless not
    ``log_skipped``) instead of raising.
    """
    builtins = _read_dir(Path(builtin_dir), True, warnings, log_skipped) if builtin_dir is not None else []
    users = _read_dir(Path(user_dir), False, warnings, log_skipped) if user_dir is not None else []
    seen: set[str] = set()
    out: list[Preset] = []
    for group in (builtins, users):
        kept = []
        for p in group:
            if _key(p.name) in seen:
                message = f"skipped preset {p.path}: the name {p.name!r} is already used by another preset"
                if log_skipped:
                    log.warning(message)
                if warnings is not None:
                    warnings.append(message)
                continue
            seen.add(_key(p.name))
            kept.append(p)
        out += sorted(kept, key=lambda p: _key(p.name))
    return out


def find_preset(
    name: str,
    user_dir: str | os.PathLike[str] | None = None,
    builtin_dir: str | os.PathLike[str] | None = BUILTIN_DIR,
) -> Preset:
    """The preset called ``name`` (case-insensitive), built-ins first. PresetError if none.

    User presets are looked up only in ``user_dir`` (none when it is None). When the preset
    asked for is in a file that was skipped (named after it, or naming it), the error says
    why that file was; other skipped files are only counted."""
    skipped: list[str] = []
    presets = list_presets(builtin_dir, user_dir, skipped, log_skipped=False)
    for p in presets:
        if _key(p.name) == _key(str(name)):
            return p
    folders = [Path(d) for d in (builtin_dir, user_dir) if d is not None]
    files = [f for d in folders for f in _files_of(d, str(name))]
    own = [
        m.removeprefix("skipped ")
        for m in skipped
        if any(m.startswith(f"skipped preset {f}:") for f in files)
    ]
    if own:
        raise PresetError(f"no usable preset named {name!r}: {'; '.join(own)}")
    available = ", ".join(p.name for p in presets) or "none"
    others = ""
    if skipped:
        others = f"; {len(skipped)} other preset file(s) skipped (unreadable, or a name already used)"
    raise PresetError(f"no preset named {name!r}; available: {available}{others}")


def _files_of(directory: Path, name: str) -> list[Path]:
    """The ``.json`` files of ``directory`` that may hold the preset ``name``: the file its
    name saves to, and any whose JSON names it (read however broken the rest is)."""
    return [
        entry
        for entry in _preset_files(directory)
        if entry.name == safe_filename(name) or _key(_declared_name(entry)) == _key(name)
    ]


def _preset_files(directory: Path) -> list[Path]:
    """The preset files of ``directory`` in name order: visible ``.json`` regular files (a
    FIFO would block the read); none where the folder cannot be listed."""
    try:
        entries = sorted(directory.iterdir(), key=lambda e: e.name)
    except OSError:
        return []
    return [
        e for e in entries if not e.name.startswith(".") and e.suffix.lower() == PRESET_SUFFIX and e.is_file()
    ]


def _declared_name(path: Path) -> str:
    """The ``name`` a preset file's JSON gives, or "" (unreadable, too large, no name)."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(MAX_FILE_BYTES + 1).decode("utf-8-sig"))
    except (OSError, ValueError, RecursionError):
        return ""
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else ""


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
    atomic_write_text(target, text)
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
        atomic_write_text(old, preset_to_json(renamed))
        return old
    path = save_preset_file(renamed, directory, overwrite=False, reserved=reserved)
    if path != old:
        old.unlink(missing_ok=True)
    return path
