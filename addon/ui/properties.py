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
    FloatVectorProperty,
    IntProperty,
    IntVectorProperty,
    PointerProperty,
    StringProperty,
)

from ...warp_core.models import get_model
from ..models.parameter_rows import parameter_rows
from ..models.registry import MODEL_FROM_MODIFIER, MODEL_ITEMS, scene_models
from ..warp_setup import cuda_device_names
from .map_properties import MAP_SETTINGS, FIT_PG_map_region
from .switches import auto_switch, explicit_switch, last_frame_switch

LOSS_ITEMS = [
    ("VERTEX", "Same topology", "Distance of each cloth vertex to the same vertex of the target"),
    ("SURFACE", "Surface", "Distance between the cloth and the target surface (any topology)"),
]


def _mesh_only(_self: bpy.types.PropertyGroup, ob: bpy.types.Object) -> bool:
    return ob.type == "MESH"


class FIT_PG_target(bpy.types.PropertyGroup):
    """Where the cloth should be at one frame: another mesh object, or a shape key of the cloth."""

    kind: EnumProperty(
        name="Kind",
        description="What the cloth should match at the frame: a mesh object or a shape key of the cloth",
        items=[
            ("OBJECT", "Object", "A mesh object, evaluated at the target frame (world space)"),
            ("SHAPE_KEY", "Shape Key", "A shape key of the cloth object itself"),
        ],
        default="OBJECT",
    )
    object: PointerProperty(
        name="Target",
        type=bpy.types.Object,
        poll=_mesh_only,
        description="The mesh the cloth should match, evaluated at the target frame (world space)",
    )
    shape_key: StringProperty(name="Shape Key", description="Name of a shape key of the cloth object")
    frame: IntProperty(
        name="Frame", description="Frame at which the cloth should match the target", default=1
    )


TARGET_SOURCE_ITEMS = [
    ("MESHES", "Meshes", "Target meshes or shape keys at chosen frames"),
    ("TRACKS", "Tracks", "Motion-tracking markers of a Movie Clip, seen through the scene camera"),
]

BINDING_ITEMS = [
    ("BUNDLE", "Bundle", "The cloth point nearest the track's solved 3D bundle"),
    ("RAY", "Ray", "Where the ray through the track's marker at the start frame meets the cloth"),
    ("VERTEX", "Vertex", "A vertex picked by hand"),
    ("NONE", "Unbound", "Not on the cloth: pick a vertex to bind it"),
]


def _camera_only(_self: bpy.types.PropertyGroup, ob: bpy.types.Object) -> bool:
    return ob.type == "CAMERA"


def _bind_to_vertex(self: "FIT_PG_track_binding", _context: bpy.types.Context) -> None:
    if self.vertex >= 0:
        self.how = "VERTEX"
        self.triangle = (self.vertex,) * 3
        self.barycentric = (1.0, 0.0, 0.0)


class FIT_PG_track_binding(bpy.types.PropertyGroup):
    """Where one track sits on the cloth (filled by Bind Tracks; a vertex can be picked)."""

    track: StringProperty(name="Track", description="Name of the track in the clip")
    use: BoolProperty(name="Use", description="Fit to this track's markers", default=True)
    weight: FloatProperty(
        name="Weight",
        description="Weight of this track's markers in the fit (the track's own Weight is the camera "
        "solver's; tracks on a moving cloth have 0 there)",
        default=1.0,
        min=0.0,
        soft_max=10.0,
    )
    how: EnumProperty(
        name="Bound By",
        description="How the track was bound to the cloth",
        items=BINDING_ITEMS,
        default="NONE",
    )
    vertex: IntProperty(
        name="Vertex",
        description="Bind the track to this vertex of the cloth (-1: as found by Bind Tracks)",
        default=-1,
        min=-1,
        update=_bind_to_vertex,
    )
    triangle: IntVectorProperty(
        name="Triangle",
        description="The cloth vertices the track is bound between",
        size=3,
        default=(0, 0, 0),
    )
    barycentric: FloatVectorProperty(
        name="Barycentric",
        description="Where in its triangle the track is bound (weights of the three vertices)",
        size=3,
        default=(1.0, 0.0, 0.0),
    )
    error_px: FloatProperty(name="Error", description="RMS pixel error after the last fit", default=-1.0)


# Device choices are found once per session: listing CUDA devices initializes Warp.
_device_items_cache: list[tuple[str, str, str, int]] = []


def device_items() -> list[tuple[str, str, str, int]]:
    """("AUTO", ...), ("cpu", ...), then one item per CUDA device with its name."""
    if not _device_items_cache:
        items = [("cpu", "CPU", "Run the fit on the CPU", 1)]
        try:
            names = cuda_device_names()
        except Exception:  # no driver, no Warp: the CPU is still there
            names = []
        gpus = [f"{name} (cuda:{index})" for index, name in enumerate(names)]
        for index, (name, label) in enumerate(zip(names, gpus, strict=True)):
            items.append((f"cuda:{index}", label, f"Run the fit on {name}", index + 2))
        best = gpus[0] if gpus else "CPU"
        auto = (
            f"The CPU for cloths of fewer vertices than where {best} was measured faster, "
            f"{best} from there (or always, where no GPU was measured)"
            if gpus
            else "The CPU: no CUDA device found"
        )
        items.insert(0, ("AUTO", "Best Available", auto, 0))
        _device_items_cache[:] = items
    return _device_items_cache


def _device_enum_items(_self: bpy.types.PropertyGroup, _context: bpy.types.Context | None) -> list:
    return device_items()


class FIT_PG_settings(bpy.types.PropertyGroup):
    """Fit settings of one object. Each model's ``fit_<parameter>`` booleans and tie options
    are added below."""

    model: EnumProperty(
        name="Model",
        description="The material model whose settings are fitted",
        items=MODEL_ITEMS,
        default=MODEL_FROM_MODIFIER,
    )
    targets: CollectionProperty(
        type=FIT_PG_target, name="Targets", description="Where the cloth should be at chosen frames"
    )
    active_target_index: IntProperty(
        name="Active Target", description="The target selected in the list", default=0
    )
    target_source: EnumProperty(
        name="Targets",
        description="What the cloth is fitted to: meshes or shape keys, or tracked footage",
        items=TARGET_SOURCE_ITEMS,
        default="MESHES",
    )
    clip: PointerProperty(name="Clip", type=bpy.types.MovieClip, description="The tracked footage")
    tracking_object: StringProperty(
        name="Tracking Object",
        description="Tracking object of the clip whose tracks are fitted (empty: the camera's tracks)",
        default="",
    )
    camera: PointerProperty(
        name="Camera",
        type=bpy.types.Object,
        poll=_camera_only,
        description="The camera that filmed the clip, following its solve or animated (empty: the scene "
        "camera); the lens is the clip's",
    )
    huber_px: FloatProperty(
        name="Robust Above",
        description="Markers off by more than this many pixels pull linearly, not quadratically (Huber), "
        "so a few mistracked markers cannot drag the fit",
        default=2.0,
        min=0.01,
        soft_max=50.0,
        subtype="PIXEL",
    )
    tolerance_px: FloatProperty(
        name="Tolerance (px)",
        description="Reprojection RMSE that counts as matching the tracks",
        default=1.0,
        min=0.0,
        subtype="PIXEL",
    )
    use_auto_tolerance_px: BoolProperty(
        name="Automatic Tolerance (px)",
        description="Count the tracks as matched within a reprojection RMSE of 1 pixel; untick to choose "
        "the tolerance",
        **auto_switch("tolerance_px", 1.0),
    )
    bindings: CollectionProperty(
        type=FIT_PG_track_binding,
        name="Track Bindings",
        description="Where each track of the clip sits on the cloth",
    )
    active_binding_index: IntProperty(
        name="Active Binding", description="The track binding selected in the list", default=0
    )
    loss: EnumProperty(
        name="Loss",
        description="How the distance to the targets is measured",
        items=LOSS_ITEMS,
        default="VERTEX",
    )
    max_iterations: IntProperty(
        name="Max Iterations",
        description="Stop after this many optimizer iterations (each runs the simulation at least once)",
        default=30,
        min=1,
        soft_max=200,
    )
    time_budget: FloatProperty(
        name="Time Budget",
        description="Stop after this many seconds",
        default=60.0,
        min=0.0,
        subtype="TIME_ABSOLUTE",
        unit="TIME_ABSOLUTE",
    )
    use_time_budget: BoolProperty(
        name="Limit Time",
        description="Stop the fit after a time budget; unticked, only Max Iterations stops it",
        **explicit_switch("time_budget", 60.0),
    )
    tolerance: FloatProperty(
        name="Tolerance",
        description="RMSE that counts as matching the targets; raise it for noisy targets such as scans",
        default=1e-3,
        min=0.0,
        subtype="DISTANCE",
        unit="LENGTH",
    )
    use_auto_tolerance: BoolProperty(
        name="Automatic Tolerance",
        description="Count the targets as matched within the smaller of 1 mm and 0.1 % of their motion; "
        "untick to choose the tolerance",
        **auto_switch("tolerance", 1e-3),
    )
    device: EnumProperty(
        name="Device", description="Where the fit's simulations run", items=_device_enum_items
    )
    start_values_json: StringProperty(
        name="Start Values",
        description="JSON {parameter: value} used instead of the modifier's values as fit start values",
        default="",
    )
    allow_unmodeled: BoolProperty(
        name="Ignore Unsupported Settings",
        description="Fit even when the cloth uses settings the fit does not simulate (self collision, some "
        "force fields, a pressure group, ...); the result then carries a warning for each",
        default=False,
    )
    result_json: StringProperty(name="Result", description="Summary of the last fit (JSON)", default="")
    previous_values_json: StringProperty(
        name="Previous Values",
        description="Modifier values before the fitted ones were applied (JSON)",
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
        name="Error Frame",
        description="Target frame of the error colors",
        default=0,
        min=0,
    )
    use_auto_error_frame: BoolProperty(
        name="Last Target Frame",
        description="Color the errors at the last target frame; untick to choose the target frame",
        # a view of error_frame, where the bake reads 0 as the last target frame
        **last_frame_switch("error_frame"),
    )
    start_values_name: StringProperty(
        name="Start Values From", description="The preset the start values come from (empty: typed in)"
    )
    error_overlay_json: StringProperty(
        name="Error Overlay", description="The fit error shown in the viewport, and what to restore (JSON)"
    )


def _add_model_options(annotations: dict) -> None:
    """A ``fit_<parameter>`` check box per parameter and a box per tie option, of every model,
    named after Blender's name of the setting ("Fit Air Viscosity")."""
    for model in scene_models():
        rows = parameter_rows(model.parameter_groups)
        for p in get_model(model.name).parameters:
            row = rows.get(p.name)
            label = row.label if row is not None else p.label
            about = f": {row.description}" if row is not None and row.description else ""
            check_box = BoolProperty(
                name=f"Fit {label}",
                description=f"Let the fit find the {model.modifier_label.lower()}'s {label}{about}",
                default=p.name in model.default_fit,
            )
            annotations.setdefault(f"fit_{p.name}", check_box)
        for tie in model.ties:
            annotations.setdefault(
                tie.key, BoolProperty(name=tie.label, description=tie.description, default=tie.default)
            )


_add_model_options(FIT_PG_settings.__annotations__)
FIT_PG_settings.__annotations__.update(MAP_SETTINGS)


classes = (FIT_PG_target, FIT_PG_track_binding, FIT_PG_map_region, FIT_PG_settings)


def register() -> None:
    bpy.types.Object.fit_to_target = PointerProperty(type=FIT_PG_settings)
    # a choice of the run (which objects, how), not of one object: kept with the scene
    bpy.types.Scene.fit_to_target_shared = BoolProperty(
        name="Shared Material",
        description="With several selected objects: fit one set of values for all of them together "
        "(pieces of the same fabric under different conditions) instead of one set each",
        default=False,
    )


def unregister() -> None:
    if hasattr(bpy.types.Scene, "fit_to_target_shared"):
        del bpy.types.Scene.fit_to_target_shared
    if hasattr(bpy.types.Object, "fit_to_target"):
        del bpy.types.Object.fit_to_target
