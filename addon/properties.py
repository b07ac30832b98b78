"""Per-object fit settings: ``Object.fit_to_target`` (saved with the .blend).

No ``from __future__ import annotations`` here: Blender reads the property definitions
from the class annotations, which must stay objects, not strings.
"""

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from ..warp_core.models.blender_cloth.params import PARAMETER_NAMES

# Fitted unless the user says otherwise: the two a clamped or draped sheet shows best.
DEFAULT_FIT = ("tension_stiffness", "bending_stiffness")

# Tie groups: when a tie is on, the first fitted member leads and the others follow it.
TIE_GROUPS: dict[str, tuple[str, ...]] = {
    "tie_compression": ("tension_stiffness", "compression_stiffness"),
    "tie_damping": ("tension_damping", "compression_damping", "shear_damping"),
}

MODEL_ITEMS = [
    ("BLENDER_CLOTH", "Blender Cloth", "Fit the settings of the object's Cloth modifier"),
    ("SOFT_BODY", "Soft Body (later)", "Not available yet: Soft Body fitting is planned"),
]
MODEL_NAMES = {"BLENDER_CLOTH": "blender_cloth", "SOFT_BODY": "soft_body"}

LOSS_ITEMS = [
    ("VERTEX", "Same topology", "Distance of each cloth vertex to the same vertex of the target"),
    ("SURFACE", "Surface", "Distance between the cloth and the target surface (any topology)"),
]


def parameter_label(name: str) -> str:
    return name.replace("_", " ").capitalize()


def _mesh_only(_self: bpy.types.PropertyGroup, ob: bpy.types.Object) -> bool:
    return ob.type == "MESH"


class FIT_PG_target(bpy.types.PropertyGroup):
    """Where the cloth should be at one frame: another mesh object, or a shape key of the cloth."""

    kind: EnumProperty(
        name="Kind",
        items=[
            ("OBJECT", "Object", "A mesh object, evaluated at the target frame (world space)"),
            ("SHAPE_KEY", "Shape Key", "A shape key of the cloth object itself"),
        ],
        default="OBJECT",
    )
    object: PointerProperty(name="Target", type=bpy.types.Object, poll=_mesh_only)
    shape_key: StringProperty(name="Shape Key", description="Name of a shape key of the cloth object")
    frame: IntProperty(
        name="Frame", description="Frame at which the cloth should match the target", default=1
    )


# Device choices are found once per session: listing CUDA devices initializes Warp.
_device_items_cache: list[tuple[str, str, str, int]] = []


def device_items() -> list[tuple[str, str, str, int]]:
    """("AUTO", ...), ("cpu", ...), then one item per CUDA device with its name."""
    if not _device_items_cache:
        items = [("cpu", "CPU", "Run the fit on the CPU", 1)]
        gpus: list[tuple[str, str]] = []
        try:
            import warp as wp

            from .fitting import configure_warp  # here: fitting imports this module

            configure_warp()
            for index, device in enumerate(wp.get_cuda_devices()):
                gpus.append((device.alias, f"{device.name} ({device.alias})"))
                items.append((device.alias, gpus[-1][1], f"Run the fit on {device.name}", index + 2))
        except Exception:  # no driver, no Warp: the CPU is still there
            pass
        best = gpus[0][1] if gpus else "CPU"
        items.insert(0, ("AUTO", "Best Available", f"Currently {best}", 0))
        _device_items_cache[:] = items
    return _device_items_cache


def _device_enum_items(_self: bpy.types.PropertyGroup, _context: bpy.types.Context | None) -> list:
    return device_items()


class FIT_PG_settings(bpy.types.PropertyGroup):
    """Fit settings of one object. The ``fit_<parameter>`` booleans are added below."""

    model: EnumProperty(name="Model", items=MODEL_ITEMS, default="BLENDER_CLOTH")
    tie_compression: BoolProperty(
        name="Compression = Tension",
        description="Fit one stiffness for stretching and compression (Blender's default keeps them equal)",
        default=True,
    )
    tie_damping: BoolProperty(
        name="Dampings Together",
        description="Fit one value for tension, compression and shear damping",
        default=True,
    )
    targets: CollectionProperty(type=FIT_PG_target)
    active_target_index: IntProperty(default=0)
    loss: EnumProperty(name="Loss", items=LOSS_ITEMS, default="VERTEX")
    max_iterations: IntProperty(name="Max Iterations", default=30, min=1, soft_max=200)
    time_budget: FloatProperty(
        name="Time Budget", description="Stop after this many seconds (0: no limit)", default=0.0, min=0.0,
        subtype="TIME_ABSOLUTE", unit="TIME_ABSOLUTE",
    )
    device: EnumProperty(name="Device", items=_device_enum_items)
    start_values_json: StringProperty(
        name="Start Values",
        description="JSON {parameter: value} used instead of the modifier's values as fit start values",
        default="",
    )
    result_json: StringProperty(name="Result", description="Summary of the last fit (JSON)", default="")
    previous_values_json: StringProperty(
        name="Previous Values", description="Modifier values before the fitted ones were applied (JSON)",
        default="",
    )
    applied: BoolProperty(name="Applied", description="The modifier holds the fitted values", default=False)
    bake_json: StringProperty(name="Bake", description="State of the active bake (JSON)", default="")
    bake_error_colors: BoolProperty(
        name="Error Colors",
        description="Also write a per-vertex error color attribute (red = large error) at a target frame",
        default=False,
    )
    error_frame: IntProperty(
        name="Error Frame", description="Target frame of the error colors (0: the last target frame)",
        default=0, min=0,
    )


for _name in PARAMETER_NAMES:
    FIT_PG_settings.__annotations__[f"fit_{_name}"] = BoolProperty(
        name=parameter_label(_name),
        description=f"Fit the cloth modifier's {parameter_label(_name).lower()}",
        default=_name in DEFAULT_FIT,
    )


def fitted_parameters(settings: FIT_PG_settings) -> tuple[list[str], dict[str, str]]:
    """(free parameters, ties follower -> leader) from the check boxes and the tie options."""
    chosen = [n for n in PARAMETER_NAMES if getattr(settings, f"fit_{n}")]
    return resolve_ties(chosen, {key: bool(getattr(settings, key)) for key in TIE_GROUPS})


def resolve_ties(chosen: list[str], ties_on: dict[str, bool]) -> tuple[list[str], dict[str, str]]:
    """Apply the tie groups to a list of chosen parameters: within an active group the first
    chosen member leads and every other member follows it (even if not chosen itself)."""
    free = list(chosen)
    ties: dict[str, str] = {}
    for key, group in TIE_GROUPS.items():
        if not ties_on.get(key):
            continue
        leaders = [n for n in group if n in chosen]
        if not leaders:
            continue
        for follower in group:
            if follower != leaders[0]:
                ties[follower] = leaders[0]
                if follower in free:
                    free.remove(follower)
    return free, ties


classes = (FIT_PG_target, FIT_PG_settings)


def register() -> None:
    bpy.types.Object.fit_to_target = PointerProperty(type=FIT_PG_settings)


def unregister() -> None:
    if hasattr(bpy.types.Object, "fit_to_target"):
        del bpy.types.Object.fit_to_target
