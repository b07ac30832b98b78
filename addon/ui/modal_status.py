"""What the modal operators (Fit, Bake, Fit Fabric) show while they run: the status bar's
text and a redraw of the sidebar panels that draw their progress."""

import bpy


def redraw_panels(context: bpy.types.Context) -> None:
    """Redraw every 3D View (the sidebar's panels show a run's progress)."""
    for window in getattr(context.window_manager, "windows", ()):
        for area in getattr(window.screen, "areas", ()):
            if area.type == "VIEW_3D":
                area.tag_redraw()


def set_status(context: bpy.types.Context, text: str | None) -> None:
    """The status bar's text (None: Blender's own again)."""
    workspace = getattr(context, "workspace", None)
    if workspace is not None:
        workspace.status_text_set(text)
