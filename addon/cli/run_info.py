"""Where and how a batch run ran, for its report: a fit can end on another machine than it
started on a farm, and a result is only comparable with the host, versions, device and
command line it came from."""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from typing import Any

import bpy

from ..extension import addon_version
from .progress_log import utc_now


class RunClock:
    """Made when the command starts; read by the report at the end of the run."""

    def __init__(self) -> None:
        self.started = utc_now()
        self._t0 = time.perf_counter()

    def seconds(self) -> float:
        return round(time.perf_counter() - self._t0, 3)


def device_name(alias: str) -> str:
    """The hardware behind a Warp device alias ("cpu", "cuda:0")."""
    if alias.startswith("cuda"):
        try:
            import warp as wp

            return str(wp.get_device(alias).name)
        except Exception:  # noqa: BLE001 - a name is a courtesy; the alias is what ran
            return alias
    return _cpu_name()


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _warp_version() -> str | None:
    module = sys.modules.get("warp")
    return str(getattr(module, "__version__", None)) if module is not None else None


def run_info(argv: list[str], clock: RunClock, threads: int | None, devices: list[str]) -> dict[str, Any]:
    """The report's ``run`` entry."""
    return {
        "host": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "blender": bpy.app.version_string,
        "warp": _warp_version(),
        "extension": addon_version(),
        "command_line": list(argv),
        "started": clock.started,
        "seconds": clock.seconds(),
        "threads": threads,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device_names": {alias: device_name(alias) for alias in sorted(set(devices))},
    }
