"""The device a fit runs on: the CPU or a CUDA device as asked, or, for "AUTO", by the
problem's size. Small cloths fit faster on the CPU, where a GPU spends its time waiting on
launches, so AUTO picks a CUDA device only from the vertex count at which that GPU was
measured faster than the CPU. Those crossover points are in ``assets/device_crossover.json``,
written by ``bench/device_crossover.py --write-table``.

Read by the add-on (``addon.warp_setup``, which adds Blender's side: where Warp's cache is and
whether a driver was found) and by the fabric fit, which places each virtual test rig by its
own size.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UserError

__all__ = [
    "CROSSOVER_TABLE",
    "Crossover",
    "CrossoverTable",
    "DeviceChoice",
    "DeviceError",
    "choose_device",
    "crossover_table_problems",
    "cuda_names",
    "load_crossover_table",
    "placed_device",
]

GPU_REQUIREMENT = "an NVIDIA GPU (Turing or newer) with an R580 or newer driver"
CROSSOVER_TABLE = Path(__file__).resolve().parents[1] / "assets" / "device_crossover.json"
PRECISIONS = ("float32", "float64")


class DeviceError(UserError, ValueError):
    """A device that is not there or has no such name; the message says which exist."""


def cuda_names() -> list[str]:
    """The name of each CUDA device Warp sees, in alias order (``cuda:0`` first)."""
    import warp as wp

    return [device.name for device in wp.get_cuda_devices()]


@dataclass(frozen=True)
class DeviceChoice:
    """The device a fit runs on, and why: made by :func:`choose_device`; ``device`` is read by
    whoever builds the fit, ``reason`` by whoever reports it (panel, batch report)."""

    device: str  # Warp's alias: "cpu" or "cuda:N"
    reason: str  # one sentence: "CPU: 400 vertices, below the 2,304 at which the NVIDIA H200 ..."


@dataclass(frozen=True)
class Crossover:
    """From which vertex count a GPU's fit beat the CPU's: made by :meth:`CrossoverTable.lookup`,
    read by :func:`choose_device`."""

    gpu_name: str  # the GPU it was measured on: "NVIDIA H200"
    vertices: int | None  # None: that GPU was not faster than the CPU at any size measured
    largest_measured_vertices: int
    source: str  # how a reason cites it: "measured 2026-11-20 against a 16-core CPU"


@dataclass(frozen=True)
class CrossoverTable:
    """The crossover table (``assets/device_crossover.json``) read and checked: made by
    :func:`load_crossover_table` (or a test, from its own data), read by :func:`choose_device`."""

    gpus: tuple[dict[str, Any], ...]
    default: dict[str, Any]

    @classmethod
    def from_data(cls, data: Any, where: str = "the crossover table") -> CrossoverTable:
        problems = crossover_table_problems(data)
        if problems:
            raise ValueError(f"{where}: " + "; ".join(problems))
        return cls(tuple(data["gpus"]), data["default"])

    def lookup(self, gpu_name: str, precision: str) -> Crossover | None:
        """The crossover of the entry whose pattern is in ``gpu_name`` (the longest, where
        several are), else the default's; None where no GPU was measured at ``precision``."""
        name = gpu_name.casefold()
        matches = [e for e in self.gpus if precision in e["crossover_vertices"]]
        matches = [e for e in matches if e["gpu_pattern"].casefold() in name]
        if matches:
            entry = max(matches, key=lambda e: len(e["gpu_pattern"]))
            return _crossover(entry, precision, "measured")
        pattern = self.default["from_gpu"].get(precision)
        for entry in self.gpus:
            if entry["gpu_pattern"] == pattern:
                how = f"this GPU not measured: the largest crossover measured, the {entry['gpu_name']}'s,"
                return _crossover(entry, precision, how)
        return None


def _crossover(entry: dict[str, Any], precision: str, how: str) -> Crossover:
    measured = entry["measured"]
    # the CPU it was measured against: a fit's CPU time depends on the host
    source = f"{how} {measured['date']} against a {measured['host_cpu_cores']}-core CPU"
    largest = entry["largest_measured_vertices"][precision]
    return Crossover(entry["gpu_name"], entry["crossover_vertices"][precision], largest, source)


def crossover_table_problems(data: Any) -> list[str]:
    """What is wrong with a crossover table's data ([] when nothing): every entry must say
    where its numbers were measured, and the default must come from an entry."""
    if not isinstance(data, dict) or data.get("format") != 1:
        return ["not a crossover table of format 1"]
    gpus, default = data.get("gpus"), data.get("default")
    if not isinstance(gpus, list) or not isinstance(default, dict):
        return ["it needs a 'gpus' list and a 'default' object"]
    problems: list[str] = []
    for k, entry in enumerate(gpus):
        problems += [f"gpus[{k}]: {p}" for p in _entry_problems(entry)]
    if problems:
        return problems
    if len({e["gpu_pattern"] for e in gpus}) < len(gpus):
        problems.append("two entries share a gpu_pattern")
    by_pattern = {e["gpu_pattern"]: e for e in gpus}
    crossover, source = default.get("crossover_vertices"), default.get("from_gpu")
    if not all(isinstance(v, t) for v, t in ((default.get("rule"), str), (crossover, dict), (source, dict))):
        return [*problems, "default: it needs 'rule', 'crossover_vertices' and 'from_gpu'"]
    for precision in set(crossover) | set(source):
        entry = by_pattern.get(source.get(precision))
        if entry is None or entry["crossover_vertices"].get(precision, 0) != crossover.get(precision, 0):
            problems.append(f"default: its {precision} crossover is not that of the entry 'from_gpu' names")
    return problems


def _entry_problems(entry: Any) -> list[str]:
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("gpu_pattern"), str)
        or not entry["gpu_pattern"]
    ):
        return ["it needs a gpu_pattern"]
    crossover, largest = entry.get("crossover_vertices"), entry.get("largest_measured_vertices")
    if not all(
        isinstance(v, t) for v, t in ((entry.get("gpu_name"), str), (crossover, dict), (largest, dict))
    ):
        return ["it needs gpu_name, crossover_vertices and largest_measured_vertices"]
    problems = []
    if not crossover or set(crossover) - set(PRECISIONS) or set(largest) != set(crossover):
        problems.append(f"crossover_vertices needs one or more of {PRECISIONS}, each with its largest size")
    for precision, vertices in crossover.items():
        top = largest.get(precision)
        if not isinstance(top, int) or top <= 0:
            problems.append(f"largest_measured_vertices[{precision}] is not a vertex count")
        elif vertices is not None and (not isinstance(vertices, int) or not 0 < vertices <= top):
            problems.append(f"crossover_vertices[{precision}] is neither null nor a count up to {top}")
    measured = entry.get("measured")
    if not isinstance(measured, dict):
        return [*problems, "it says nowhere where it was measured ('measured')"]
    if not re.fullmatch(r"\d{4}-\d\d-\d\d", str(measured.get("date"))):
        problems.append("measured.date is not YYYY-MM-DD")
    cores = measured.get("host_cpu_cores")
    if not isinstance(cores, int) or cores <= 0:
        problems.append("measured.host_cpu_cores is not a core count")
    for key in ("host_cpu", "source"):
        if not isinstance(measured.get(key), str) or not measured[key]:
            problems.append(f"measured.{key} is empty")
    return problems


@functools.cache
def load_crossover_table(path: Path = CROSSOVER_TABLE) -> CrossoverTable:
    """The crossover table at ``path``, checked; ValueError or OSError when it cannot be used."""
    return CrossoverTable.from_data(json.loads(path.read_text(encoding="utf-8")), str(path))


def choose_device(
    requested: str,
    vertex_count: int | None,
    *,
    cuda_names: Sequence[str],
    table: CrossoverTable | None = None,
    precision: str = "float64",
    driver_missing: bool = False,
) -> DeviceChoice:
    """The device a fit of ``vertex_count`` vertices runs on at ``precision`` (the model's).
    "cpu", "cuda" and "cuda:N" are checked and kept. "AUTO": the CPU without a CUDA device;
    the first CUDA device where the size is not known (None) or no GPU was measured; else the
    GPU whose crossover comes first, when the cloth reaches it, and the CPU below it.
    ``cuda_names``: the CUDA devices' names, ``cuda:0`` first (:func:`cuda_names`);
    ``table`` defaults to ``assets/device_crossover.json``; ``driver_missing``: no NVIDIA
    driver was found (a named CUDA device's refusal says so). :class:`DeviceError` for a
    device that is not there."""
    name = (requested or "AUTO").strip()
    if name.upper() != "AUTO":
        device = _named_device(name, len(cuda_names), driver_missing)
        label = "CPU" if device == "cpu" else f"{device} ({cuda_names[int(device[5:])]})"
        return DeviceChoice(device, f"{label}: as asked")
    if not cuda_names:
        why = "no NVIDIA CUDA driver found" if driver_missing else "no CUDA device found"
        return DeviceChoice("cpu", f"CPU: {why}")
    first = f"cuda:0 ({cuda_names[0]})"
    if vertex_count is None:
        return DeviceChoice("cuda:0", f"{first}: the first CUDA device (the cloth's size was not given)")
    if table is None:
        try:
            table = load_crossover_table()
        except (OSError, ValueError) as e:
            return DeviceChoice("cuda:0", f"{first}: the first CUDA device (crossover table unusable: {e})")
    found = [(k, gpu, table.lookup(gpu, precision)) for k, gpu in enumerate(cuda_names)]
    known = [(k, gpu, c) for k, gpu, c in found if c is not None]
    if not known:
        return DeviceChoice("cuda:0", f"{first}: the first CUDA device (no GPU measured at {precision})")
    k, gpu, crossover = min(known, key=lambda f: (f[2].vertices is None, f[2].vertices or 0, f[0]))
    count = f"{vertex_count:,} vertices"
    if crossover.vertices is None:
        largest = crossover.largest_measured_vertices
        why = f"the {gpu} was not faster than the CPU at any size measured, up to {largest:,} vertices"
        return DeviceChoice("cpu", f"CPU: {count}; {why} ({crossover.source})")
    if vertex_count < crossover.vertices:
        why = f"below the {crossover.vertices:,} at which the {gpu} is faster"
        return DeviceChoice("cpu", f"CPU: {count}, {why} ({crossover.source})")
    why = f"at or above the crossover, {crossover.vertices:,}, from which it is faster than the CPU"
    return DeviceChoice(f"cuda:{k}", f"cuda:{k} ({gpu}): {count}, {why} ({crossover.source})")


def _named_device(name: str, count: int, driver_missing: bool) -> str:
    """ "cpu", "cuda" or "cuda:N" checked against the ``count`` CUDA devices there are."""
    if name.lower() == "cpu":
        return "cpu"
    match = re.fullmatch(r"cuda(?::(\d+))?", name.lower())
    if not match:
        raise DeviceError(f"unknown device '{name}': use cpu, cuda or cuda:N")
    index = int(match.group(1) or 0)
    if index >= count:
        if count:
            found = f"{count} CUDA device(s) found"
        elif driver_missing:
            found = f"no NVIDIA CUDA driver found; CUDA needs {GPU_REQUIREMENT}"
        else:
            found = "no CUDA device found"
        raise DeviceError(f"device cuda:{index} is not available ({found})")
    return f"cuda:{index}"


def placed_device(requested: str, vertex_count: int, precision: str = "float64") -> DeviceChoice:
    """:func:`choose_device` with the CUDA devices Warp sees on this machine: where a problem
    of ``vertex_count`` vertices runs when ``requested`` is "auto" (or "cpu", "cuda", "cuda:N"
    as asked)."""
    return choose_device(requested, vertex_count, cuda_names=cuda_names(), precision=precision)
