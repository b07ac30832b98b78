"""A way from Properties > Physics > Cloth (and Soft Body) to the Fit to Target panel: a row
appended to Blender's own physics panels, and the operator it runs, which opens the 3D
View's sidebar on the Fit tab.

``Region.active_panel_category`` is writable in Blender 5.0, but only once the sidebar has
drawn its tabs: on a sidebar that was hidden, setting it fails (read-only, no categories
yet). The operator then shows the sidebar and chooses the tab a moment later, after the
sidebar has drawn.
"""

from __future__ import annotations

import time

import bpy

FIT_CATEGORY = "Fit"  # bl_category of the Fit to Target panels
RETRY_S = 0.1  # how often to try the tab again after the sidebar was shown
RETRY_FOR_S = 2.0  # and for how long: a sidebar draws within a few redraws

# Blender's panels the row is appended to: the cloth's and the soft body's main panels
PHYSICS_PANELS = ("PHYSICS_PT_cloth", "PHYSICS_PT_softbody")


def sidebars(screen: bpy.types.Screen | None) -> list[bpy.types.Region]:
    """The sidebar regions of the 3D Views of ``screen``."""
    if screen is None:
        return []
    return [r for area in screen.areas if area.type == "VIEW_3D" for r in area.regions if r.type == "UI"]


def choose_fit_tab(region: bpy.types.Region) -> bool:
    """Put the sidebar ``region`` on the Fit tab; False when it has no tabs yet."""
    try:
        region.active_panel_category = FIT_CATEGORY
    except (AttributeError, TypeError):  # read-only before its first draw; no such tab yet
        return False
    return True


# screen name -> until when (time.monotonic) its sidebars should still be turned to the Fit tab
_wanted: dict[str, float] = {}


def choose_fit_tab_later() -> float | None:
    """Timer: the Fit tab on the sidebars of the screens waiting for it (found again by name,
    not kept: a screen may be gone by then); again after RETRY_S while some have no tabs yet."""
    now = time.monotonic()
    for name, until in list(_wanted.items()):
        pending = [r for r in sidebars(bpy.data.screens.get(name)) if not choose_fit_tab(r)]
        if not pending or now >= until:
            del _wanted[name]
    return RETRY_S if _wanted else None


class FIT_OT_show_panel(bpy.types.Operator):
    """Open the 3D View's sidebar on the Fit tab, where the fit of this object is set up"""

    bl_idname = "fit.show_panel"
    bl_label = "Open Fit to Target Panel"

    def execute(self, context: bpy.types.Context) -> set[str]:
        screen = context.screen
        views = [a for a in screen.areas if a.type == "VIEW_3D"] if screen is not None else []
        if not views:
            self.report({"WARNING"}, "No 3D View in this window: open one, then its sidebar (N), tab Fit")
            return {"CANCELLED"}
        for area in views:
            area.spaces.active.show_region_ui = True
            area.tag_redraw()
        if all(choose_fit_tab(r) for r in sidebars(screen)):
            self.report({"INFO"}, "The sidebar shows the Fit tab")
        else:
            _wanted[screen.name] = time.monotonic() + RETRY_FOR_S
            if not bpy.app.timers.is_registered(choose_fit_tab_later):
                bpy.app.timers.register(choose_fit_tab_later, first_interval=RETRY_S)
            self.report({"INFO"}, "Opened the sidebar: it turns to the Fit tab once drawn")
        return {"FINISHED"}


def draw_physics_link(self: bpy.types.Panel, context: bpy.types.Context) -> None:
    """Appended to Blender's Cloth and Soft Body panels: where the fit of this object is."""
    # as a property row of the panel's split layout: the label right-aligned on the left
    split = self.layout.split(factor=0.4)
    col = split.column()
    col.alignment = "RIGHT"
    col.label(text="Fit to Target")
    split.operator(FIT_OT_show_panel.bl_idname, text="Open in Sidebar", icon="VIEW3D")


classes = (FIT_OT_show_panel,)


def register() -> None:
    for name in PHYSICS_PANELS:
        panel = getattr(bpy.types, name, None)
        if panel is not None:
            panel.append(draw_physics_link)


def unregister() -> None:
    _wanted.clear()
    if bpy.app.timers.is_registered(choose_fit_tab_later):
        bpy.app.timers.unregister(choose_fit_tab_later)
    for name in PHYSICS_PANELS:
        panel = getattr(bpy.types, name, None)
        if panel is not None:
            panel.remove(draw_physics_link)
