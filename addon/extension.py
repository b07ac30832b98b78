"""This copy of the add-on: the package Blender knows it by, and its version."""

from __future__ import annotations

import tomllib
from pathlib import Path

# ``bl_ext.<repository>.fit_to_target`` when installed as an extension, else the name the
# checkout was imported under (``fit_to_target`` for batch.py and the tests).
EXTENSION_PACKAGE = __package__.rpartition(".")[0] if __package__ else "fit_to_target"

MANIFEST = Path(__file__).resolve().parent.parent / "blender_manifest.toml"


def addon_version() -> str:
    try:
        return str(tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["version"])
    except (OSError, KeyError, ValueError):
        return "unknown"
