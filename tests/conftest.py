"""Shared pytest setup for every test: the repository root importable, Warp quiet, on the CPU,
and every report a test writes checked against the shipped schema.

``tests/core`` never imports bpy; ``tests/blender`` runs the real Blender module (its own
conftest sets up an isolated Blender profile first).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_schema_check import ReportCheck

REPO_ROOT = Path(__file__).resolve().parent.parent

os.environ.setdefault(
    "WARP_CACHE_PATH",
    str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fit_to_target" / "warp"),
)

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # plain `import warp_core` for core tests

import warp as wp  # noqa: E402  (after the cache path is set)

wp.config.quiet = True
wp.config.log_level = wp.LOG_WARNING  # module-load messages


@pytest.fixture
def wp_device() -> str:
    """Warp device for tests: always the CPU, so results do not depend on the machine."""
    return "cpu"


_REPORTS = ReportCheck()


@pytest.fixture(autouse=True)
def reports_match_the_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After each test: every report written under pytest's base temp folder (or the Blender
    tests' own temp folder) since the last check validates against assets/report.schema.json."""
    yield
    roots = [tmp_path_factory.getbasetemp()]
    scenes = sys.modules.get("addon_scenes")  # tests/blender's helpers write under their TMP too
    if scenes is not None and getattr(scenes, "TMP", None) is not None:
        roots.append(Path(scenes.TMP))
    invalid = _REPORTS.invalid(roots)
    if invalid:
        pytest.fail("\n".join(invalid), pytrace=False)
