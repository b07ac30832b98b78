"""Every report the tests write validates against the shipped schema (``assets/report.schema.json``).

``tests/conftest.py`` runs :meth:`ReportCheck.invalid` at each test's teardown over pytest's
base temp folder (and the Blender tests' own temp folder): each ``*.json`` there that is a
report (a JSON object with ``version``, ``objects`` and ``exit_code``) and has not been
checked in its current state is validated with ``jsonschema``. It stays cheap over a whole
session: a folder whose modification time is unchanged is not listed again, a file already
checked at the same modification time, size and inode is not read again, and a file over
:data:`MAX_BYTES` or not starting with ``{`` is not parsed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "assets" / "report.schema.json"
REPORT_KEYS = frozenset({"version", "objects", "exit_code"})
SHOWN_ERRORS = 5  # errors shown per invalid report
# larger files are not read (a test's deliberately huge or sparse file); a report is far smaller
MAX_BYTES = 32 * 1024 * 1024
# a folder listed less than this long after it changed is listed again (file systems whose
# modification times are coarse would otherwise hide a file added in the same tick)
SETTLE_NS = 2_000_000_000


def is_report(data: Any) -> bool:
    """Whether parsed JSON is a batch report (not a preset, a result file or other data)."""
    return isinstance(data, dict) and REPORT_KEYS <= data.keys()


def load_validator(path: Path = SCHEMA_PATH) -> Any:
    """A Draft 2020-12 validator of the schema at ``path`` (checked to be a valid schema)."""
    from jsonschema import Draft202012Validator

    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_errors(validator: Any, data: Any, limit: int = SHOWN_ERRORS) -> list[str]:
    """The first ``limit`` validation errors of ``data``, each as ``where: what``."""
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    shown = []
    for error in errors[:limit]:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        shown.append(f"{where}: {error.message}")
    if len(errors) > limit:
        shown.append(f"... and {len(errors) - limit} more")
    return shown


class ReportCheck:
    """Validates the reports found under some folders, each state of each file once."""

    def __init__(self, schema_path: Path = SCHEMA_PATH) -> None:
        self.schema_path = schema_path
        self._validator: Any = None
        self.checked: set[tuple[str, int, int, int]] = set()  # (path, mtime_ns, size, inode)
        # folder -> (its mtime_ns, when listed, its subfolders, its *.json files)
        self._listed: dict[str, tuple[int, int, list[str], list[str]]] = {}

    @property
    def validator(self) -> Any:
        if self._validator is None:
            self._validator = load_validator(self.schema_path)
        return self._validator

    def _listing(self, folder: str) -> tuple[list[str], list[str]]:
        """(subfolders, *.json files) of ``folder``, listed again only if it changed."""
        mtime = os.stat(folder).st_mtime_ns
        cached = self._listed.get(folder)
        if cached is not None and cached[0] == mtime and cached[1] - mtime > SETTLE_NS:
            return cached[2], cached[3]
        now = time.time_ns()
        folders, files = [], []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                    files.append(entry.path)
        self._listed[folder] = (mtime, now, folders, files)
        return folders, files

    def json_files(self, roots: Iterable[Path]) -> Iterator[str]:
        stack = [str(root) for root in roots]
        while stack:
            folder = stack.pop()
            try:
                folders, files = self._listing(folder)
            except OSError:  # removed meanwhile, or not there yet
                self._listed.pop(folder, None)
                continue
            stack.extend(folders)
            yield from files

    def new_reports(self, roots: Iterable[Path]) -> Iterator[tuple[str, Any]]:
        """(path, parsed report) of each report not checked in its current state."""
        for path in self.json_files(roots):
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = (path, st.st_mtime_ns, st.st_size, st.st_ino)
            if key in self.checked:
                continue
            self.checked.add(key)
            if st.st_size > MAX_BYTES:
                continue
            try:
                with open(path, "rb") as f:
                    if f.read(64).lstrip()[:1] != b"{":  # not a JSON object: not a report
                        continue
                    f.seek(0)
                    data = json.loads(f.read())
            except (OSError, ValueError):  # not JSON (a partial or binary file): not a report
                continue
            if is_report(data):
                yield path, data

    def invalid(self, roots: Iterable[Path]) -> list[str]:
        """One message per new report that does not validate: its path and first errors."""
        found = []
        for path, data in self.new_reports(roots):
            errors = schema_errors(self.validator, data)
            if errors:
                lines = "\n".join(f"  {e}" for e in errors)
                found.append(f"{path} does not match {self.schema_path.name}:\n{lines}")
        return found
