"""The ``blender_cloth`` model: Blender's cloth modifier, fitted through its own fields."""

from __future__ import annotations

from typing import Any

from ...mesh import ClothMesh
from ..base import Parameter
from .params import PARAMETER_BOUNDS, PARAMETER_NAMES, ClothParams
from .simulator import ClothSimulator


class BlenderClothModel:
    """Parameters are literally ``ClothSettings`` fields, bounded by Blender's hard limits,
    so fitted values written back make Blender's own solver reproduce the target."""

    name = "blender_cloth"
    label = "Blender Cloth"

    def __init__(self) -> None:
        defaults = ClothParams()
        self.parameters: tuple[Parameter, ...] = tuple(
            Parameter(
                name=n,
                label=n.replace("_", " ").capitalize(),
                default=float(getattr(defaults, n)),
                bounds=PARAMETER_BOUNDS[n],
            )
            for n in PARAMETER_NAMES
        )

    def default_settings(self) -> ClothParams:
        return ClothParams()

    def settings_from_dict(self, values: dict[str, Any]) -> ClothParams:
        values = dict(values)
        if "gravity" in values:
            values["gravity"] = tuple(values["gravity"])
        return ClothParams(**values)

    def build(
        self,
        geometry: ClothMesh,
        settings: ClothParams,
        device: str,
        precision: str,
        start_frame: int = 1,
    ) -> ClothSimulator:
        return ClothSimulator(geometry, settings, device=device, precision=precision, start_frame=start_frame)


MODEL = BlenderClothModel()
