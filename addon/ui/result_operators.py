"""Operators on what a fit left: the fit error shown in the viewport (Show / Hide Fit Error),
the fitted weights shown in Weight Paint mode (Show Fitted Weights), the loss curve opened
large, a jump to a target's frame, and clearing the start values a preset gave. ``register``
also adds the handlers that keep the out-of-date check current.

No ``from __future__ import annotations``: Blender reads operator properties from the class
annotations, which must stay objects.
"""

import bpy
from bpy.props import IntProperty, StringProperty

from ..errors import FitInputError
from ..scene.checks import check_object
from ..scene.error_overlay import hide_error, show_error
from ..scene.loss_curve import record_curve_image
from ..scene.records import read_record
from ..scene.staleness import install_handlers, remove_handlers
from .map_result_ui import fitted_group, show_weights


class _ActiveObjectOperator(bpy.types.Operator):
    """Acts on the active object (a mesh with the model's modifier); one clear error message."""

    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        try:
            check_object(ob)
            level, text = self.run(context, ob)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        self.report({level}, text)
        return {"FINISHED"}

    def run(self, context: bpy.types.Context, ob: bpy.types.Object) -> tuple[str, str]:
        raise NotImplementedError


class OBJECT_OT_fit_to_target_show_error(_ActiveObjectOperator):
    """Color the cloth by its distance to the target, simulated with its current settings"""

    bl_idname = "object.fit_to_target_show_error"
    bl_label = "Show Fit Error"
    bl_description = (
        "Color the cloth by its distance to the target, simulated with its current settings at the "
        "target frame nearest the current one: green within the tolerance, yellow at 3x, red from 10x"
    )

    def run(self, context, ob):
        return ("INFO", show_error(context, ob).message)


class OBJECT_OT_fit_to_target_hide_error(_ActiveObjectOperator):
    """Remove the fit error colors and put the viewport shading back as it was"""

    bl_idname = "object.fit_to_target_hide_error"
    bl_label = "Hide Fit Error"

    def run(self, context, ob):
        if not hide_error(ob):
            raise FitInputError(f"'{ob.name}' shows no fit error")
        return ("INFO", f"Hid the fit error of '{ob.name}'")


class OBJECT_OT_fit_to_target_show_weights(_ActiveObjectOperator):
    """Show the fitted weight map in Weight Paint mode: its vertex group becomes the active one"""

    bl_idname = "object.fit_to_target_show_weights"
    bl_label = "Show Fitted Weights"
    bl_description = (
        "Make the vertex group holding the fitted weights the active one and enter Weight Paint mode to "
        "show it (Tab or the mode menu leaves it)"
    )

    kind: StringProperty(  # type: ignore[valid-type]
        name="Map", description="The fitted map to show: structural, shear or bending (empty: the first)"
    )

    def run(self, context, ob):
        group = fitted_group(ob, read_record(ob), self.kind)
        return ("INFO", show_weights(context, ob, group))


def show_image(context: bpy.types.Context, image: bpy.types.Image) -> str:
    """Show ``image`` in an Image Editor: one already open in a window, else a new window
    made from the current area and turned into one. Returns where, for the report;
    FitInputError when there is no window (background mode)."""
    for window in context.window_manager.windows:
        for area in window.screen.areas:
            if area.type == "IMAGE_EDITOR":
                area.spaces.active.image = image
                area.tag_redraw()
                return "in the Image Editor"
    window, area = context.window, context.area
    if window is None or area is None:
        raise FitInputError(f"no window to show it in: open an Image Editor and pick image '{image.name}'")
    before = set(context.window_manager.windows[:])
    with context.temp_override(window=window, area=area):
        bpy.ops.screen.area_dupli("INVOKE_DEFAULT")
    new = [w for w in context.window_manager.windows if w not in before]
    if not new:
        raise FitInputError(
            f"no new window could be opened: open an Image Editor and pick image '{image.name}'"
        )
    editor = new[0].screen.areas[0]
    editor.type = "IMAGE_EDITOR"
    editor.spaces.active.image = image
    return "in a new window"


class OBJECT_OT_fit_to_target_show_loss_curve(_ActiveObjectOperator):
    """Open the last fit's RMSE per iteration (log scale, the tolerance dashed) in an Image Editor"""

    bl_idname = "object.fit_to_target_show_loss_curve"
    bl_label = "Show Fit Loss Curve"
    bl_options = {"REGISTER"}

    def run(self, context, ob):
        image = record_curve_image(ob)
        if image is None:
            raise FitInputError(f"'{ob.name}' has no fit result with a loss curve: fit it first")
        return ("INFO", f"Loss curve of '{ob.name}' ({image.name}) {show_image(context, image)}")


class OBJECT_OT_fit_to_target_jump_to_target(bpy.types.Operator):
    """Go to this target's frame"""

    bl_idname = "object.fit_to_target_jump_to_target"
    bl_label = "Jump to Target Frame"
    bl_options = {"REGISTER", "UNDO"}

    index: IntProperty(  # type: ignore[valid-type]
        name="Target", description="Index of the target in the active object's target list", default=0, min=0
    )

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        s = getattr(ob, "fit_to_target", None)
        if s is None or not 0 <= self.index < len(s.targets):
            count = len(s.targets) if s is not None else 0
            self.report({"ERROR"}, f"No target {self.index + 1}: the active object has {count} target(s)")
            return {"CANCELLED"}
        frame = int(s.targets[self.index].frame)
        s.active_target_index = self.index
        context.scene.frame_set(frame)
        return {"FINISHED"}


class OBJECT_OT_fit_to_target_clear_start_values(bpy.types.Operator):
    """Start the next fit from the modifier's values again, not from the preset's"""

    bl_idname = "object.fit_to_target_clear_start_values"
    bl_label = "Clear Fit Start Values"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        s = getattr(ob, "fit_to_target", None)
        if s is None or not s.start_values_json:
            self.report({"ERROR"}, "The active object's fit has no start values to clear")
            return {"CANCELLED"}
        name = s.start_values_name
        s.start_values_json = ""
        s.start_values_name = ""
        where = f" (preset '{name}')" if name else ""
        self.report(
            {"INFO"},
            f"The next fit of '{ob.name}' starts from its modifier's values, not the start values{where}",
        )
        return {"FINISHED"}


classes = (
    OBJECT_OT_fit_to_target_show_error,
    OBJECT_OT_fit_to_target_hide_error,
    OBJECT_OT_fit_to_target_show_weights,
    OBJECT_OT_fit_to_target_show_loss_curve,
    OBJECT_OT_fit_to_target_jump_to_target,
    OBJECT_OT_fit_to_target_clear_start_values,
)


def register() -> None:
    install_handlers()


def unregister() -> None:
    remove_handlers()
