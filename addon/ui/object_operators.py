"""Operators on the active object's fit: its targets, Apply/Revert of the fitted values
(also for every object of the same run), and Unbake (Bake is in ``bake_operators``).

No ``from __future__ import annotations``: Blender reads operator properties from the class
annotations, which must stay objects.
"""

import bpy
from bpy.props import BoolProperty

from ..errors import FitInputError
from ..models.registry import object_model
from ..scene.bake import is_baked, unbake_object
from ..scene.checks import check_object
from ..scene.records import read_record
from ..scene.write_back import apply_result, revert


def check_target_frame(ob: bpy.types.Object, frame: int) -> None:
    """FitInputError unless ``frame`` can take a new target of ``ob``: after its simulation's
    cache start, no later than its end, and not the frame of one of its targets."""
    mod = check_object(ob)
    model = object_model(ob)
    start, end = model.cache_frame_range(mod)
    if not start < frame <= end:
        raise FitInputError(
            f"frame {frame} is outside the {model.modifier_label.lower()} cache range {start}-{end} of "
            f"'{ob.name}': a target lies after the cache start, at frames {start + 1}-{end}; go to one "
            f"of those, or change the range (Physics > {model.modifier_label} > Cache)"
        )
    for t in ob.fit_to_target.targets:
        if t.frame == frame:
            if t.kind == "SHAPE_KEY":
                what = f"shape key '{t.shape_key}'"
            else:
                what = f"'{t.object.name}'" if t.object is not None else "a target with no object"
            raise FitInputError(
                f"'{ob.name}' already has a target at frame {frame} ({what}): one target per frame; "
                "remove that one first (Remove Fit Target), or go to another frame"
            )


class OBJECT_OT_fit_to_target_add_target(bpy.types.Operator):
    """Add a target at the current frame: the one other selected mesh object, or the active shape key"""

    bl_idname = "object.fit_to_target_add_target"
    bl_label = "Add Current Frame"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        try:
            check_object(ob)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        s = ob.fit_to_target
        frame = context.scene.frame_current
        level = "INFO"
        others = [o for o in context.selected_objects if o != ob and o.type == "MESH"]
        key = ob.active_shape_key if ob.data.shape_keys is not None else None
        if len(others) > 1:
            # which one is meant cannot be told: the active object is the cloth
            listed = ", ".join(f"'{o.name}'" for o in others)
            self.report(
                {"ERROR"},
                f"{len(others)} other meshes are selected ({listed}): select only the target mesh "
                f"and '{ob.name}' (active), then add the frame again",
            )
            return {"CANCELLED"}
        adds_key = not others and key is not None and ob.active_shape_key_index > 0
        try:
            if others or adds_key:  # else: nothing to add, said below
                check_target_frame(ob, frame)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        if others:
            item = s.targets.add()
            item.kind, item.object, item.frame = "OBJECT", others[0], frame
            names = f"'{others[0].name}'"
        elif adds_key:
            item = s.targets.add()
            item.kind, item.shape_key, item.frame = "SHAPE_KEY", key.name, frame
            names = f"shape key '{key.name}'"
            if key.value > 0.0 and not key.mute:
                # Blender adds keys at value 1.0: the key would also deform the cloth's rest shape
                level = "WARNING"
                names += f" (its value {key.value:g} is now 0: it no longer deforms the cloth's rest shape)"
                key.value = 0.0
        else:
            self.report({"ERROR"}, "Select the target mesh too (cloth active), or make a shape key active")
            return {"CANCELLED"}
        s.active_target_index = len(s.targets) - 1
        self.report({level}, f"Target {names} at frame {frame}")
        return {"FINISHED"}


class OBJECT_OT_fit_to_target_remove_target(bpy.types.Operator):
    """Remove the selected target"""

    bl_idname = "object.fit_to_target_remove_target"
    bl_label = "Remove Fit Target"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        s = getattr(ob, "fit_to_target", None)
        if s is None or not 0 <= s.active_target_index < len(s.targets):
            self.report({"ERROR"}, "No target selected")
            return {"CANCELLED"}
        s.targets.remove(s.active_target_index)
        s.active_target_index = min(s.active_target_index, len(s.targets) - 1)
        return {"FINISHED"}


class _ObjectResultOperator(bpy.types.Operator):
    """Base for Apply/Revert/Unbake: act on the active object, one clear error message."""

    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        try:
            check_object(ob)
            message = self.run(context, ob)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        if message:
            level, text = message
            self.report({level}, text)
        return {"FINISHED"}

    def run(self, context: bpy.types.Context, ob: bpy.types.Object) -> tuple[str, str] | None:
        raise NotImplementedError


def run_objects(ob: bpy.types.Object) -> list[bpy.types.Object]:
    """The objects fitted in the same run as ``ob`` (its last result says which), that still
    exist; ``ob`` alone when it was fitted by itself."""
    names = (read_record(ob) or {}).get("run_objects") or [ob.name]
    objects = [bpy.data.objects.get(n) for n in names]
    return [o for o in objects if o is not None] or [ob]


class _RunResultOperator(_ObjectResultOperator):
    """Apply/Revert for the active object, or with ``all_objects`` for every object fitted
    in the same run (all of them checked first, so an error changes none)."""

    all_objects: BoolProperty(  # type: ignore[valid-type]
        name="All Objects",
        description="Every object fitted in the same run as the active one",
        default=False,
        options={"SKIP_SAVE"},
    )

    def run(self, context, ob):
        objects = run_objects(ob) if self.all_objects else [ob]
        for o in objects:
            self.check(o)
        for o in objects:
            self.act(o)
        names = ", ".join(f"'{o.name}'" for o in objects)
        return ("INFO", self.done_message.format(names=names))

    def check(self, ob: bpy.types.Object) -> None:
        raise NotImplementedError

    def act(self, ob: bpy.types.Object) -> None:
        raise NotImplementedError


class OBJECT_OT_fit_to_target_apply(_RunResultOperator):
    """Write the fitted values into the cloth modifier (the current ones are kept for Revert)"""

    bl_idname = "object.fit_to_target_apply"
    bl_label = "Apply Fitted Values"
    done_message = "Applied the fitted values to {names}"

    def check(self, ob):
        check_object(ob)
        if not ob.fit_to_target.result_json:
            raise FitInputError(f"'{ob.name}' has no fit result to apply")

    def act(self, ob):
        apply_result(ob)


class OBJECT_OT_fit_to_target_revert(_RunResultOperator):
    """Put back the modifier values from before the fitted ones were applied; keep or remove a bake"""

    bl_idname = "object.fit_to_target_revert"
    bl_label = "Revert Fitted Values"
    done_message = "Reverted {names} to the previous settings"

    remove_bake: BoolProperty(  # type: ignore[valid-type]
        name="Remove Bake",
        description="Also remove the bake (its Mesh Cache modifier; the .pc2 file stays): it plays the "
        "fitted values, not the reverted ones. Unticked, the bake stays and keeps playing",
        default=False,
        options={"SKIP_SAVE"},
    )

    def baked(self, context: bpy.types.Context) -> list[bpy.types.Object]:
        ob = context.active_object
        if ob is None:
            return []
        return [o for o in (run_objects(ob) if self.all_objects else [ob]) if is_baked(o)]

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        if self.baked(context):  # keep the bake or not: the artist says
            return context.window_manager.invoke_props_dialog(self, confirm_text="Revert")
        return self.execute(context)

    def draw(self, context: bpy.types.Context) -> None:
        names = ", ".join(f"'{o.name}'" for o in self.baked(context))
        self.layout.label(text=f"{names}: baked with the fitted values")
        self.layout.prop(self, "remove_bake")

    def check(self, ob):
        check_object(ob)
        if not ob.fit_to_target.previous_values_json:
            raise FitInputError(f"'{ob.name}' has no previous values to revert to")

    def act(self, ob):
        revert(ob, remove_bake=self.remove_bake)

    def run(self, context, ob):
        kept = [] if self.remove_bake else self.baked(context)
        level, text = super().run(context, ob)
        if kept:  # say so: the bake plays the fitted values, the modifier now holds the others
            names = ", ".join(f"'{o.name}'" for o in kept)
            text += f"; the bake of {names} stays and plays the fitted values (Remove Fit Bake removes it)"
        return level, text


class OBJECT_OT_fit_to_target_unbake(_ObjectResultOperator):
    """Remove the bake's Mesh Cache modifier and switch the cloth modifier back on (the file is kept)"""

    bl_idname = "object.fit_to_target_unbake"
    bl_label = "Remove Fit Bake"

    def run(self, context, ob):
        if not unbake_object(ob):
            raise FitInputError(f"'{ob.name}' is not baked")
        return ("INFO", f"Unbaked '{ob.name}'")


classes = (
    OBJECT_OT_fit_to_target_add_target,
    OBJECT_OT_fit_to_target_remove_target,
    OBJECT_OT_fit_to_target_apply,
    OBJECT_OT_fit_to_target_revert,
    OBJECT_OT_fit_to_target_unbake,
)
