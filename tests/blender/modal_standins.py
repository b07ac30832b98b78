"""Stand-ins for what only a windowed Blender gives a modal operator, so that tests can call
its own ``invoke`` and ``modal`` with the real context, as Blender's event loop would.

The window manager is the real one with its modal-handler registration, progress and timer
calls recorded; the workspace's status text is recorded; events are plain records.
"""

from __future__ import annotations

from types import SimpleNamespace

import bpy


class WindowManagerProxy:
    """The real window manager; modal handler registration is recorded instead (no event loop)."""

    def __init__(self, wm: bpy.types.WindowManager) -> None:
        self._wm = wm
        self.handlers: list = []
        self.progress: list[float] = []
        self.progress_range: tuple | None = None
        self.progress_ended = 0
        self.timers: list = []

    def modal_handler_add(self, operator) -> bool:
        self.handlers.append(operator)
        return True

    def progress_begin(self, lo, hi) -> None:
        self.progress_range = (lo, hi)
        self._wm.progress_begin(lo, hi)

    def progress_update(self, value) -> None:
        self.progress.append(value)
        self._wm.progress_update(value)

    def progress_end(self) -> None:
        self.progress_ended += 1
        self._wm.progress_end()

    def event_timer_add(self, step, window=None):
        timer = self._wm.event_timer_add(step, window=window)
        self.timers.append(timer)
        return timer

    def event_timer_remove(self, timer) -> None:
        self.timers.remove(timer)
        self._wm.event_timer_remove(timer)

    def __getattr__(self, name):
        return getattr(self._wm, name)


class ContextProxy:
    """``bpy.context`` with the recording window manager and a recorded status bar."""

    def __init__(self) -> None:
        self._ctx = bpy.context
        self.window_manager = WindowManagerProxy(bpy.context.window_manager)
        self.status: list[str | None] = []
        self.workspace = SimpleNamespace(status_text_set=self.status.append)

    def __getattr__(self, name):
        return getattr(self._ctx, name)


class OperatorStandIn:
    """The operator instance as invoke/modal use it: attributes, properties and report()."""

    def __init__(self, shared: bool | None = None) -> None:
        self.reports: list[tuple[set, str]] = []
        self.shared = bool(shared)
        self.properties = SimpleNamespace(
            is_property_set=lambda name: name == "shared" and shared is not None
        )

    def report(self, kind: set, message: str) -> None:
        self.reports.append((set(kind), message))


def event(kind: str, value: str = "NOTHING") -> SimpleNamespace:
    return SimpleNamespace(type=kind, value=value)


# what an artist does while an operator runs: select (either mouse button), open menus, move, type
OTHER_EVENTS = [
    ("RIGHTMOUSE", "PRESS"),
    ("RIGHTMOUSE", "RELEASE"),
    ("LEFTMOUSE", "PRESS"),
    ("LEFTMOUSE", "CLICK"),
    ("MOUSEMOVE", "NOTHING"),
    ("WHEELUPMOUSE", "PRESS"),
    ("A", "PRESS"),
    ("X", "PRESS"),
    ("RET", "PRESS"),
    ("ESC", "RELEASE"),
]
