"""Material presets: validated JSON files of a model's settings, never executed.

:mod:`.schema` is the document (what a preset may hold, its validation, its JSON text);
:mod:`.files` is the library on disk (built-ins, a user folder the caller names, atomic
writes). Scripts may import the names below from here.
"""

from .files import (
    BUILTIN_DIR,
    delete_preset_file,
    find_preset,
    list_presets,
    load_preset_file,
    rename_preset_file,
    safe_filename,
    save_preset_file,
    write_preset_json,
)
from .schema import (
    MAX_FILE_BYTES,
    MAX_NOTES_LENGTH,
    MODEL,
    PROVENANCE_KEYS,
    SCHEMA_VERSION,
    VALUE_KEYS,
    Preset,
    PresetError,
    check_name,
    parse_preset,
    preset_to_json,
    validate_preset,
)

__all__ = [
    "BUILTIN_DIR",
    "MAX_FILE_BYTES",
    "MAX_NOTES_LENGTH",
    "MODEL",
    "PROVENANCE_KEYS",
    "SCHEMA_VERSION",
    "VALUE_KEYS",
    "Preset",
    "PresetError",
    "check_name",
    "delete_preset_file",
    "find_preset",
    "list_presets",
    "load_preset_file",
    "parse_preset",
    "preset_to_json",
    "rename_preset_file",
    "safe_filename",
    "save_preset_file",
    "validate_preset",
    "write_preset_json",
]
