"""The Fabric sub-panel's Fit Fabric operator (modal with a worker thread, or blocking) and
its Cancel (Save Fabric as Preset is in :mod:`.fabric_panel`, beside the rows it saves).

A fabric fit turns the lab numbers on the active object (``Object.fit_to_target_fabric``,
:mod:`.fabric_panel`) into Blender cloth settings through the virtual test rigs
(``warp_core.rigs.lab_fit.fit_fabric``) on the object's own mesh resolution, and writes the
settings it chose into the object's Cloth modifier in one undo step. The worker thread only
runs the core: every ``bpy`` read and write happens on the main thread, before it starts and
after it ends.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from ...warp_core.rigs.fabric import EDGE_RANGE_MM, FabricNumbers
from ...warp_core.rigs.fabric_result import FabricResult
from ...warp_core.rigs.lab_fit import FabricFitCancelled, fit_fabric
from ...warp_core.rigs.preset import fabric_preset
from ..errors import FitInputError
from ..mesh_read import input_is_object_data, object_matrix
from ..models.blender_cloth.scene_model import export_cloth_mesh, find_cloth_modifier, set_modifier_values
from ..session import begin_fabric_fit, busy_with, end_fabric_fit
from ..warp_setup import configure_warp, resolve_device
from .bake_operators import bake_under_way
from .modal_status import redraw_panels, set_status

TIMER_STEP_S = 0.1  # how often the modal operator looks at the worker
# the panel's names of the lab numbers (FabricNumbers fields), for messages and result rows
NUMBER_LABELS = {
    "weight_gsm": "Weight",
    "bending_length_mm": "Bending Length",
    "drape_coefficient": "Drape Coefficient",
    "elongation_percent": "Elongation",
    "bias_elongation_percent": "Bias Elongation",
    "load_n_per_m": "Load",
}
NUMBER_UNITS = {"bending_length_mm": " mm", "elongation_percent": " %", "bias_elongation_percent": " %"}


def fabric_numbers(s: bpy.types.PropertyGroup) -> FabricNumbers:
    """The lab numbers of a ``FIT_PG_fabric``: an unticked number was not measured (None).
    FitInputError naming the panel's number when the core finds one implausible."""
    try:
        return FabricNumbers(
            weight_gsm=s.weight_gsm,
            bending_length_mm=s.bending_length_mm if s.use_bending_length else None,
            drape_coefficient=s.drape_coefficient if s.use_drape_coefficient else None,
            elongation_percent=s.elongation_percent if s.use_elongation else None,
            bias_elongation_percent=s.bias_elongation_percent if s.use_bias_elongation else None,
            load_n_per_m=s.load_n_per_m,
        )
    except ValueError as e:
        raise FitInputError(_number_message(str(e))) from None


def _number_message(message: str) -> str:
    """The core's "weight_gsm = 5 is outside ..." with the panel's name of the number and
    what to do about it."""
    for name, label in NUMBER_LABELS.items():
        if message.startswith(name):
            return (
                f"{label}{message[len(name) :]}: change {label} in the Fabric panel to a value in that range"
            )
    return message


def numbers_problem(s: bpy.types.PropertyGroup) -> str | None:
    """What is wrong with a ``FIT_PG_fabric``'s numbers for a fit, or None."""
    try:
        numbers = fabric_numbers(s)
    except FitInputError as e:
        return str(e)
    if not numbers.measured:
        return "Tick at least one lab number besides the weight: the rigs fit the settings to it"
    return None


def mesh_edge_m(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph, exact: bool = False) -> float:
    """The mean edge length (m, world space, the object's scale applied) of the mesh the
    Cloth modifier starts from: what the rigs' strips are built of. With modifiers above
    the cloth only ``exact`` reads that mesh (it switches the stack, so not while drawing);
    otherwise the evaluated mesh stands in for it, the same at the cloth's start frame. NaN
    for a mesh without edges."""
    mod = find_cloth_modifier(ob)
    if exact and mod is not None:
        mesh = export_cloth_mesh(ob, depsgraph)
        vertices, edges = mesh.vertices, mesh.edges
    else:
        ob_eval = ob.evaluated_get(depsgraph)
        plain = mod is None or input_is_object_data(ob, mod, depsgraph)
        me = ob.data if plain else ob_eval.data  # the original mesh: nothing above changes it
        co = np.empty(len(me.vertices) * 3, dtype=np.float32)
        me.vertices.foreach_get("co", co)
        # lengths only: the matrix's translation drops out, its scale and rotation stay
        vertices = co.reshape(-1, 3).astype(np.float64) @ object_matrix(ob_eval)[:3, :3].T
        edges = np.empty(len(me.edges) * 2, dtype=np.int32)
        me.edges.foreach_get("vertices", edges)
        edges = edges.reshape(-1, 2)
    if len(edges) == 0:
        return float("nan")
    return float(np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=1).mean())


def why_not_fabric(ob: bpy.types.Object | None, edge_m: float | None = None) -> str | None:
    """Why the fabric of ``ob`` (on ``edge_m`` edges, if read) cannot be fitted now, or None."""
    busy = busy_with() or bake_under_way()
    if busy:
        return f"{busy}: wait for it or cancel it"
    if ob is None:
        return "Select a mesh with a Cloth modifier"
    if ob.type != "MESH":
        return f"'{ob.name}' is not a mesh: select a mesh with a Cloth modifier"
    if find_cloth_modifier(ob) is None:
        return f"'{ob.name}' has no Cloth modifier: add one in Properties > Physics, then fit its fabric"
    if edge_m is not None and edge_m != edge_m:  # NaN: no edges
        return f"'{ob.name}' has no edges: the rigs build their strips of the mesh's edge length"
    if edge_m is not None and not EDGE_RANGE_MM[0] <= edge_m * 1e3 <= EDGE_RANGE_MM[1]:
        lo, hi = EDGE_RANGE_MM
        return (
            f"'{ob.name}' has edges of {edge_m * 1e3:.3g} mm on average; the fabric rigs need "
            f"{lo:g}-{hi:g} mm: apply or change the object's scale, or remesh it"
        )
    return None


@dataclass
class FabricRun:
    """A fabric fit of one object: made on the main thread by the Fit Fabric operator, run by
    :meth:`start` (a worker thread) or :meth:`run_here`; the panel reads ``text``."""

    object_name: str
    numbers: FabricNumbers
    edge_m: float
    device: str = "AUTO"  # the object's Device setting: "AUTO" places each rig by its size
    text: str = "starting..."  # the rig under way, as ``fit_fabric`` says it
    stop: threading.Event = field(default_factory=threading.Event)
    result: FabricResult | None = None
    error: Exception | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self.run_here, name="fabric fit", daemon=True).start()

    def run_here(self) -> None:
        # the worker: only the core runs here, never bpy
        try:
            self.result = fit_fabric(
                self.numbers,
                self.edge_m,
                device=self.device,
                progress=self._heard,
                should_stop=self.stop.is_set,
            )
        except FabricFitCancelled:
            pass
        except Exception as e:  # reported by the operator on the main thread
            self.error = e
        finally:
            self.done.set()

    def _heard(self, text: str) -> None:
        self.text = text  # one reference swap: the main thread reads whole strings

    def status_text(self) -> str:
        if self.stop.is_set():
            return f"Fit to Target: cancelling the fabric fit of '{self.object_name}'..."
        return f"Fit to Target: fabric of '{self.object_name}': {self.text} (Esc to cancel)"


_run: FabricRun | None = None  # one fabric fit at a time, as the panel shows it


def active_fabric_fit() -> FabricRun | None:
    return _run


def _prepare(context: bpy.types.Context) -> FabricRun:
    """The active object's fabric fit, checked; FitInputError when it cannot run."""
    ob = context.active_object
    reason = why_not_fabric(ob) or numbers_problem(ob.fit_to_target_fabric)
    if reason is None:
        edge_m = mesh_edge_m(ob, context.evaluated_depsgraph_get(), exact=True)
        reason = why_not_fabric(ob, edge_m)
    if reason is not None:
        raise FitInputError(reason)
    configure_warp()  # main thread, before any worker touches Warp
    device = ob.fit_to_target.device
    resolve_device(device)  # a device that is not there is refused here, not in the worker
    return FabricRun(ob.name, fabric_numbers(ob.fit_to_target_fabric), edge_m, device)


def _rig_line(row: dict[str, Any]) -> str:
    unit = NUMBER_UNITS.get(row["number"], "")
    label = NUMBER_LABELS.get(row["number"], row["number"])
    reading, requested = f"{row['reading']:.4g}{unit}", f"{row['requested']:g}{unit}"
    return f"{row['rig']} reads {reading} for {label} {requested} ({row['outcome']}{starts_words(row)})"


def starts_words(row: dict[str, Any]) -> str:
    """A rig row's spread of starts in words ("" for a rig of one start): the drape reads the
    mean of several, and one scene's drape may lie that far from it."""
    spread = float(row.get("spread", 0.0))
    return f"; single drapes {spread:.2f} apart" if spread > 0.0 else ""


def finish(op: bpy.types.Operator, context: bpy.types.Context, run: FabricRun) -> set[str]:
    """A finished fit into the scene (main thread): the settings into the Cloth modifier and
    the result onto the object, reported. Nothing changes when it failed or was cancelled."""
    if run.stop.is_set():  # the artist cancelled: even a fit that ended meanwhile is dropped
        op.report({"WARNING"}, f"Fabric fit of '{run.object_name}' cancelled: nothing was changed")
        return {"CANCELLED"}
    if run.error is not None:
        op.report({"ERROR"}, f"Fabric fit of '{run.object_name}' failed: {run.error}")
        return {"CANCELLED"}
    ob = bpy.data.objects.get(run.object_name)
    mod = find_cloth_modifier(ob) if ob is not None else None
    if mod is None:  # removed while the rigs ran
        op.report({"ERROR"}, f"'{run.object_name}' has no Cloth modifier any more: nothing was changed")
        return {"CANCELLED"}
    result = run.result
    if result is None:
        op.report({"ERROR"}, f"Fabric fit of '{run.object_name}' gave no result: nothing was changed")
        return {"CANCELLED"}
    values = result.cloth_values()
    set_modifier_values(mod, values)
    rows = [
        {k: getattr(r, k) for k in ("rig", "number", "requested", "reading", "outcome", "spread")}
        for r in result.rigs
    ]
    record = {
        "edge_mm": result.edge_m * 1e3,
        "outcome": result.outcome,
        "seconds": result.seconds,
        "values": values,
        "rigs": rows,
        "unread": [n for n in result.numbers.measured if n not in {r.number for r in result.rigs}],
        "preset": fabric_preset(result),
    }
    ob.fit_to_target_fabric.result_json = json.dumps(record)
    op.report(*report_of(ob, record, mod.point_cache.is_baked))
    return {"FINISHED"}


def report_of(ob: bpy.types.Object, record: dict[str, Any], baked: bool) -> tuple[set[str], str]:
    """The operator's report of a written fit: INFO when every rig read its number back."""
    names = find_cloth_modifier(ob).settings.bl_rna.properties
    values = record["values"]
    written = ", ".join(
        f"{names[k].name} {v:.4g}"
        for k, v in values.items()
        if k in names and k != "quality" and not k.endswith("_max")
    )
    head = (
        f"Fabric of '{ob.name}' on {record['edge_mm']:.3g} mm edges: {written} at Quality {values['quality']}"
    )
    rigs = "; ".join(_rig_line(r) for r in record["rigs"])
    unread = ", ".join(NUMBER_LABELS.get(n, n) for n in record["unread"])
    text = head + (f"; {rigs}" if rigs else "") + (f"; no rig reads {unread} yet" if unread else "")
    if baked:
        text += "; the Cloth bake still shows the old settings: free it and bake again"
    if record["outcome"] == "matched" and not unread:
        return {"INFO"}, text
    return {"WARNING"}, f"{record['outcome']}: {text}"


def _end(op: bpy.types.Operator, context: bpy.types.Context) -> None:
    global _run
    timer = getattr(op, "_timer", None)
    if timer is not None:
        context.window_manager.event_timer_remove(timer)
        op._timer = None
    set_status(context, None)
    _run = None
    end_fabric_fit()
    redraw_panels(context)


class FIT_OT_fabric_fit(bpy.types.Operator):
    """Set the active cloth's settings from the fabric's lab numbers, fitted by virtual test rigs"""

    bl_idname = "fit.fabric_fit"
    bl_label = "Fit Fabric"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return context.active_object is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        # Blocking path (scripts, background mode): the same checks, fit and write as the modal one.
        try:
            run = _prepare(context)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        run.run_here()
        return finish(self, context, run)

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        # The rigs run in a worker while the artist keeps working; the progress shows in the
        # Fabric panel and the status bar.
        global _run
        try:
            run = _prepare(context)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        begin_fabric_fit(run.object_name)
        _run = run
        run.start()
        wm = context.window_manager
        self._timer = wm.event_timer_add(TIMER_STEP_S, window=context.window)
        wm.modal_handler_add(self)
        set_status(context, run.status_text())
        redraw_panels(context)
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        run = _run
        if run is None:  # ended elsewhere
            return {"CANCELLED"}
        # only Esc (and the panel's Cancel) stops it: clicks and keys go on to the scene
        if event.type == "ESC" and event.value == "PRESS":
            run.stop.set()
        elif event.type != "TIMER":
            return {"PASS_THROUGH"}
        if not run.done.is_set():
            set_status(context, run.status_text())
            redraw_panels(context)
            return {"RUNNING_MODAL"} if event.type == "ESC" else {"PASS_THROUGH"}
        _end(self, context)
        return finish(self, context, run)

    def cancel(self, context: bpy.types.Context) -> None:
        # Blender ends the operator (new file, quit): stop the rigs, write nothing.
        if _run is not None:
            _run.stop.set()
        _end(self, context)


class FIT_OT_fabric_cancel(bpy.types.Operator):
    """Stop the running fabric fit after its current rig run; nothing is changed"""

    bl_idname = "fit.fabric_cancel"
    bl_label = "Cancel Fabric Fit"

    def execute(self, context: bpy.types.Context) -> set[str]:
        if _run is None:
            self.report({"WARNING"}, "No fabric fit is running")
            return {"CANCELLED"}
        _run.stop.set()
        redraw_panels(context)
        return {"FINISHED"}


classes = (FIT_OT_fabric_fit, FIT_OT_fabric_cancel)
