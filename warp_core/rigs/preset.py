"""A fabric fit as a ``blender_cloth`` preset: the fitted settings, and where they came from
(the lab numbers, each rig's reading, the mesh edge) in its provenance and notes."""

from __future__ import annotations

import math
import time

from ..presets import Preset, validate_preset
from .fabric_result import FabricResult

__all__ = ["fabric_preset"]


def fabric_preset(result: FabricResult, name: str | None = None, source: str | None = None) -> dict:
    """A ``blender_cloth`` preset (``warp_core.presets`` format, validated) of the fit: the
    fitted settings (each with its group maximum) and the quality they were fitted at; other
    settings are left out, so applying it leaves them alone. Its provenance holds the lab
    numbers, each rig's reading at the fitted values, the mesh edge and, for published
    numbers, their ``source``; its notes say the same in words."""
    numbers = result.numbers
    lab = {"weight_gsm": numbers.weight_gsm} | {n: float(getattr(numbers, n)) for n in numbers.measured}
    if numbers.elongation_percent is not None or numbers.bias_elongation_percent is not None:
        lab["load_n_per_m"] = numbers.load_n_per_m
    readings = {f"{r.rig}: {r.number}": r.reading for r in result.rigs if math.isfinite(r.reading)}
    # the drape's reading is a mean of starts: how far they lay apart
    readings |= {f"{r.rig}: {r.number} spread": r.spread for r in result.rigs if len(r.starts) > 1}
    lines = [
        f"Fitted from fabric lab numbers with virtual test rigs in Blender's cloth model, for a mesh of "
        f"{result.edge_m * 1e3:g} mm edges: {result.outcome}."
    ]
    lines += [
        f"{r.rig}: {r.number} {r.requested:g}, the rig reads {r.reading:.4g}{r.spread_text} ({r.outcome})"
        for r in result.rigs
    ]
    label = ", ".join(f"{n} {getattr(numbers, n):g}" for n in numbers.measured)
    preset = Preset(
        name=name or f"Fabric {numbers.weight_gsm:g} gsm, {label}",
        values=result.cloth_values(),
        notes="\n".join(lines),
        provenance={
            "date": time.strftime("%Y-%m-%d"),
            "fit_seconds": result.seconds,
            "device": result.device,
            "fit_parameters": [f for f in result.fitted if f != "mass"],
            "lab_numbers": lab,
            "rig_readings": readings,
            "mesh_edge_m": result.edge_m,
        }
        | ({"source": source} if source else {}),
    )
    return validate_preset(preset).to_dict()
