"""Virtual fabric test rigs: the readings a fabric lab reports, taken off a cloth's state."""

from .readings import DrapeReading, bending_length, drape_reading, flexural_rigidity, shadow_radius, tip_angle

__all__ = [
    "DrapeReading",
    "bending_length",
    "drape_reading",
    "flexural_rigidity",
    "shadow_radius",
    "tip_angle",
]
