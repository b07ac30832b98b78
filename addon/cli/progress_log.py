"""The batch command's machine-readable progress (``--log``): one JSON object per line, each
with its UTC time and its event, written and flushed as the run goes, so a farm's monitor
can follow a task that is still running and see where a killed one stopped."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import IO, Any

from ...warp_core.fit.verdict.report import json_safe

EVENTS = ("run_start", "object_start", "iteration", "object_end", "bake", "save", "run_end")


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


class ProgressLog:
    """Made by the batch run for ``--log PATH`` (a path the run's checks allowed); its events
    go to that file. Without a path every event is dropped. A failed write (a full disk)
    ends the log, never the run: the log is a view of the run, not one of its results."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._file: IO[str] | None = None
        self.error: str | None = None

    def open(self) -> None:
        if self.path is None or self._file is not None:
            return
        try:
            self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 (closed by close())
        except OSError as e:
            self.error = e.strerror or str(e)

    def event(self, name: str, **fields: Any) -> None:
        assert name in EVENTS, name
        if self._file is None:
            return
        line = json.dumps({"time": utc_now(), "event": name, **json_safe(fields)}, allow_nan=False)
        try:
            self._file.write(line + "\n")
            self._file.flush()
        except (OSError, ValueError) as e:
            self.error = getattr(e, "strerror", None) or str(e)
            self.close()

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
