"""Fit one object: settings -> request -> exported problem (main thread) -> write-back.

Shared by the panel operator (worker thread + modal timer), its blocking ``execute`` and
the headless batch. Every user-facing failure before the fit starts is a
:class:`FitInputError` with a one-line message; nothing in the scene changes until
:func:`write_back`, which runs on the main thread after a successful fit.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bpy
import numpy as np

from ..warp_core.errors import UserError
from ..warp_core.fit import FitProblem, FitResult, FitSettings, Target
from ..warp_core.fit.report import format_mm, format_table, format_value, json_safe  # noqa: F401
from ..warp_core.models.blender_cloth.params import CLOTH_SETTINGS_FIELDS, PARAMETER_NAMES
from . import export
from .job import FitJob, JobMessage
from .properties import MODEL_NAMES, fitted_parameters

REPORT_VERSION = 1


class FitInputError(UserError, ValueError):
    """The fit cannot start; the message (one line) says what to change."""


@dataclass
class TargetSpec:
    """A target: a mesh object evaluated at ``frame``, or a shape key of the cloth object."""

    frame: int
    object_name: str = ""
    shape_key: str = ""

    def describe(self) -> str:
        if self.shape_key:
            return f"shape key '{self.shape_key}' at frame {self.frame}"
        return f"'{self.object_name}' at frame {self.frame}"


@dataclass
class FitRequest:
    """Everything that decides one object's fit, from the panel settings or batch arguments."""

    object_name: str
    model: str  # "blender_cloth" or "soft_body"
    fit: list[str]
    ties: dict[str, str]
    targets: list[TargetSpec]
    loss: str  # "vertex" or "surface"
    max_iterations: int = 30
    time_budget_s: float | None = None
    device: str = "AUTO"  # "AUTO", "cpu", "cuda" or "cuda:N"
    start_values: dict[str, Any] = field(default_factory=dict)


@dataclass
class PreparedFit:
    """A request with the scene exported: ready for ``warp_core.fit.fit`` in any thread."""

    request: FitRequest
    problem: FitProblem
    settings: FitSettings
    modifier_values: dict[str, Any]  # the modifier's values at export time
    cache_range: tuple[int, int]


# -- versions and Warp set-up ----------------------------------------------------------------


def addon_version() -> str:
    manifest = Path(__file__).resolve().parent.parent / "blender_manifest.toml"
    try:
        import tomllib

        return str(tomllib.loads(manifest.read_text(encoding="utf-8"))["version"])
    except (OSError, KeyError, ValueError):
        return "unknown"


def _base_package() -> str:
    return __package__.rsplit(".", 1)[0]


def configure_warp() -> None:
    """Quiet Warp, and keep its kernel cache in the extension's user folder when installed as
    an extension (unless ``WARP_CACHE_PATH`` says otherwise). Must run before Warp initializes."""
    import warp as wp

    wp.config.quiet = True
    if wp.config.log_level < wp.LOG_WARNING:
        wp.config.log_level = wp.LOG_WARNING
    if os.environ.get("WARP_CACHE_PATH") or not _base_package().startswith("bl_ext."):
        return
    try:
        wp.config.kernel_cache_dir = bpy.utils.extension_path_user(
            _base_package(), path="warp_cache", create=True
        )
    except (ValueError, OSError):  # not an installed extension after all
        pass


def resolve_device(name: str) -> str:
    """"AUTO" -> the first CUDA device, else "cpu"; validates "cuda"/"cuda:N"."""
    configure_warp()
    import warp as wp

    name = (name or "AUTO").strip()
    count = wp.get_cuda_device_count()
    if name.upper() == "AUTO":
        return "cuda:0" if count > 0 else "cpu"
    if name.lower() == "cpu":
        return "cpu"
    match = re.fullmatch(r"cuda(?::(\d+))?", name.lower())
    if not match:
        raise FitInputError(f"unknown device '{name}': use cpu, cuda or cuda:N")
    index = int(match.group(1) or 0)
    if index >= count:
        found = f"{count} CUDA device(s) found" if count else "no CUDA device found"
        raise FitInputError(f"device cuda:{index} is not available ({found})")
    return f"cuda:{index}"


# -- requests ------------------------------------------------------------------------------


def request_from_object(ob: bpy.types.Object, **overrides: Any) -> FitRequest:
    """The request the object's panel settings describe; keyword arguments replace fields."""
    s = ob.fit_to_target
    fit, ties = fitted_parameters(s)
    targets = [
        TargetSpec(
            frame=int(t.frame),
            object_name=(t.object.name if t.object is not None else "") if t.kind == "OBJECT" else "",
            shape_key=t.shape_key if t.kind == "SHAPE_KEY" else "",
        )
        for t in s.targets
    ]
    request = FitRequest(
        object_name=ob.name,
        model=MODEL_NAMES[s.model],
        fit=fit,
        ties=ties,
        targets=targets,
        loss=s.loss.lower(),
        max_iterations=int(s.max_iterations),
        time_budget_s=float(s.time_budget) if s.time_budget > 0 else None,
        device=s.device,
        start_values=parse_start_values(s.start_values_json, ob.name),
    )
    for key, value in overrides.items():
        if value is not None:
            setattr(request, key, value)
    return request


def parse_start_values(text: str, object_name: str = "") -> dict[str, Any]:
    if not text.strip():
        return {}
    where = f"{object_name}: " if object_name else ""
    try:
        values = json.loads(text)
    except ValueError as e:
        raise FitInputError(f"{where}start values are not valid JSON ({e})") from e
    if not isinstance(values, dict):
        raise FitInputError(f"{where}start values must be a JSON object {{parameter: value}}")
    unknown = sorted(set(values) - set(CLOTH_SETTINGS_FIELDS))
    if unknown:
        raise FitInputError(f"{where}unknown parameter(s) in the start values: {', '.join(unknown)}")
    return values


def check_object(ob: bpy.types.Object | None) -> bpy.types.ClothModifier:
    """The object's cloth modifier, or FitInputError saying why there is none."""
    if ob is None:
        raise FitInputError("No active object: select a mesh with a Cloth modifier")
    if ob.type != "MESH":
        raise FitInputError(f"'{ob.name}' is {_a(ob.type)} object, not a mesh with a Cloth modifier")
    mod = export.find_cloth_modifier(ob)
    if mod is None:
        raise FitInputError(f"'{ob.name}' has no Cloth modifier: add one in Properties > Physics")
    return mod


def check_request(
    scene: bpy.types.Scene, ob: bpy.types.Object | None, request: FitRequest, check_device: bool = True
) -> tuple[bpy.types.ClothModifier, int, int]:
    """Cheap checks (no scene evaluation): returns (cloth modifier, cache start, cache end)."""
    mod = check_object(ob)
    name = ob.name
    if request.model != "blender_cloth":
        raise FitInputError("Soft Body fitting is not available yet: choose the Blender Cloth model")
    if not request.fit:
        raise FitInputError("No parameters to fit: tick at least one")
    unknown = [p for p in list(request.fit) + list(request.ties) if p not in PARAMETER_NAMES]
    if unknown:
        raise FitInputError(
            f"unknown parameter(s) {', '.join(unknown)}; choose from {', '.join(PARAMETER_NAMES)}"
        )
    if not request.targets:
        raise FitInputError(f"'{name}' has no targets: select a target mesh and press Add Current Frame")
    start, end = export.cache_frame_range(mod)
    seen: set[int] = set()
    for k, t in enumerate(request.targets, start=1):
        if t.shape_key:
            keys = ob.data.shape_keys
            if keys is None or t.shape_key not in keys.key_blocks:
                raise FitInputError(f"target {k}: '{name}' has no shape key '{t.shape_key}'")
        else:
            if not t.object_name:
                raise FitInputError(f"target {k} has no object: pick a target mesh")
            tob = bpy.data.objects.get(t.object_name)
            if tob is None:
                raise FitInputError(f"target object '{t.object_name}' does not exist")
            if tob.type != "MESH":
                raise FitInputError(f"target '{t.object_name}' is {_a(tob.type)} object, not a mesh")
            if tob == ob:
                raise FitInputError(
                    f"target {k} is the cloth object itself: pick another mesh or a shape key"
                )
        if not start < t.frame <= end:
            raise FitInputError(
                f"target frame {t.frame} is outside the cloth cache range {start}-{end}: targets must lie "
                f"after the cache start and no later than its end (Physics > Cloth > Cache)"
            )
        if t.frame in seen:
            raise FitInputError(f"two targets at frame {t.frame}: keep one per frame")
        seen.add(t.frame)
    if request.loss not in ("vertex", "surface"):
        raise FitInputError(f"unknown loss '{request.loss}': use vertex (same topology) or surface")
    if request.max_iterations < 1:
        raise FitInputError("max iterations must be at least 1")
    if check_device:
        resolve_device(request.device)
    return mod, start, end


def why_not_fittable(context: bpy.types.Context) -> str | None:
    """One line saying why the Fit button is disabled, or None (for the panel; cheap)."""
    if active_session() is not None:
        return "A fit is running"
    ob = context.active_object
    try:
        check_object(ob)
        check_request(context.scene, ob, request_from_object(ob), check_device=False)
    except FitInputError as e:
        return str(e)
    return None


# -- export ---------------------------------------------------------------------------------


def prepare_fit(
    scene: bpy.types.Scene,
    ob: bpy.types.Object,
    request: FitRequest,
    depsgraph: bpy.types.Depsgraph | None = None,
) -> PreparedFit:
    """Export the cloth, its pin goals (every frame from the cache start to the last target)
    and the targets. Main thread; the scene frame and modifier flags are restored."""
    mod, start, end = check_request(scene, ob, request)
    device = resolve_device(request.device)
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    last = max(t.frame for t in request.targets)
    frames = list(range(start, last + 1))
    by_frame: dict[int, list[tuple[int, TargetSpec]]] = {}
    for k, t in enumerate(request.targets):
        by_frame.setdefault(t.frame, []).append((k, t))
    read: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
    surface = request.loss == "surface"

    def read_targets(_k: int, frame: float) -> None:
        for k, t in by_frame.get(int(frame), ()):
            read[k] = _read_target(ob, t, depsgraph, surface)

    saved = scene.frame_current, scene.frame_subframe
    try:
        # the cloth starts from its input mesh at the cache start frame
        scene.frame_set(start)
        try:
            mesh = export.export_cloth_mesh(ob, depsgraph)
            goals, _ = export.sample_cloth_input(ob, depsgraph, scene, frames, on_frame=read_targets)
        except ValueError as e:
            raise FitInputError(_one_line(e)) from e
    finally:
        scene.frame_set(saved[0], subframe=saved[1])

    n = mesh.vertex_count
    targets = []
    for k, t in enumerate(request.targets):
        positions, triangles = read[k]
        if not surface and len(positions) != n:
            raise FitInputError(
                f"target {t.describe()} has {len(positions)} vertices, the cloth has {n}: "
                "choose the Surface loss for a target with a different topology"
            )
        if len(positions) == 0:
            raise FitInputError(f"target {t.describe()} has no vertices")
        targets.append(Target(t.frame, positions, triangles if surface else None))
    if surface:
        for t, target in zip(request.targets, targets, strict=True):
            if target.triangles is None or len(target.triangles) == 0:
                raise FitInputError(f"target {t.describe()} has no faces: the Surface loss needs a surface")

    params = export.export_cloth_params(mod, scene)
    modifier_values = {name: getattr(params, name) for name in CLOTH_SETTINGS_FIELDS}
    try:
        start_params = params.replace(**request.start_values)
        start_params.validate()
    except (ValueError, TypeError) as e:
        raise FitInputError(f"start values: {_one_line(e)}") from e
    problem = FitProblem(
        mesh=mesh,
        params=start_params,
        targets=targets,
        fit=list(request.fit),
        ties=dict(request.ties),
        start_frame=start,
        goals=goals,
        loss=request.loss,
    )
    try:
        problem.validate()
    except ValueError as e:
        raise FitInputError(f"'{ob.name}': {_one_line(e)}") from e
    settings = FitSettings(
        device=device, max_iterations=int(request.max_iterations), time_budget_s=request.time_budget_s
    )
    return PreparedFit(request, problem, settings, modifier_values, (start, end))


def _read_target(
    cloth: bpy.types.Object, t: TargetSpec, depsgraph: bpy.types.Depsgraph, surface: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """World positions (and triangles for the surface loss) of a target at the current frame."""
    if t.shape_key:
        block = cloth.data.shape_keys.key_blocks[t.shape_key]
        co = np.empty(len(block.data) * 3, dtype=np.float32)
        block.data.foreach_get("co", co)
        matrix = np.array(cloth.evaluated_get(depsgraph).matrix_world, dtype=np.float64)
        positions = co.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]
        triangles = _triangles(cloth.data) if surface else None
        return positions, triangles
    tob = bpy.data.objects[t.object_name]
    tob_eval = tob.evaluated_get(depsgraph)
    me = tob_eval.to_mesh()
    try:
        matrix = np.array(tob_eval.matrix_world, dtype=np.float64)
        co = np.empty(len(me.vertices) * 3, dtype=np.float32)
        me.vertices.foreach_get("co", co)
        positions = co.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]
        triangles = _triangles(me) if surface else None
    finally:
        tob_eval.to_mesh_clear()
    return positions, triangles


def _triangles(me: bpy.types.Mesh) -> np.ndarray:
    tris = np.empty(len(me.loop_triangles) * 3, dtype=np.int32)
    me.loop_triangles.foreach_get("vertices", tris)
    return tris.reshape(-1, 3)


# -- running --------------------------------------------------------------------------------


def run_fit(prepared: PreparedFit, progress=None, cancel=None) -> FitResult:
    """Blocking fit on the calling thread (batch, ``execute``). Raises warp_core's FitError."""
    from ..warp_core.fit import fit

    return fit(prepared.problem, prepared.settings, progress=progress, cancel=cancel)


@dataclass
class FitSession:
    """The fit running in the background, as the panel and the status bar show it."""

    prepared: PreparedFit
    job: FitJob
    started: float = field(default_factory=time.perf_counter)
    iteration: int = 0
    loss: float = float("nan")
    initial_loss: float = float("nan")
    values: dict[str, float] = field(default_factory=dict)
    progress_messages: int = 0

    @property
    def object_name(self) -> str:
        return self.prepared.request.object_name

    @property
    def max_iterations(self) -> int:
        return self.prepared.settings.max_iterations

    def update(self, messages: list[JobMessage]) -> None:
        for msg in messages:
            if msg.kind != "progress":
                continue
            self.progress_messages += 1
            self.iteration, self.loss, self.values = msg.iteration, msg.loss, msg.values
            if msg.iteration == 0:
                self.initial_loss = msg.loss

    @property
    def factor(self) -> float:
        """Progress 0..1: iterations of the maximum, or the time budget if that ends sooner."""
        f = self.iteration / max(self.max_iterations, 1)
        budget = self.prepared.settings.time_budget_s
        if budget:
            f = max(f, (time.perf_counter() - self.started) / budget)
        return min(max(f, 0.0), 1.0)

    def status_text(self) -> str:
        if self.job.cancel_requested:
            return f"Fit to Target: cancelling {self.object_name} after the current iteration..."
        if self.progress_messages == 0:
            return f"Fit to Target: {self.object_name}: first simulation... (Esc to cancel)"
        return (
            f"Fit to Target: {self.object_name}: iteration {self.iteration}/{self.max_iterations}, "
            f"loss {self.loss:.4g} (Esc to cancel)"
        )


_session: FitSession | None = None


def active_session() -> FitSession | None:
    return _session


def begin_session(prepared: PreparedFit, job: FitJob) -> FitSession:
    global _session
    if _session is not None:
        raise FitInputError("A fit is already running: wait for it or cancel it")
    _session = FitSession(prepared, job)
    return _session


def end_session() -> None:
    global _session
    _session = None


# -- write-back -----------------------------------------------------------------------------


def result_record(prepared: PreparedFit, result: FitResult) -> dict[str, Any]:
    """The object's report entry (DESIGN.md) and its ``result_json``."""
    r = prepared.request
    record = {
        "name": r.object_name,
        "object": r.object_name,
        "model": r.model,
        **result.summary(),
        "status": "cancelled" if result.cancelled else "ok",
        "fit": list(r.fit),
        "ties": dict(r.ties),
        "loss": prepared.problem.loss_kind,
        "targets": [t.describe() for t in r.targets],
        "target_frames": sorted(t.frame for t in r.targets),
        "start_frame": prepared.problem.start_frame,
        "start_values": dict(r.start_values),
        "blend_file": bpy.data.filepath,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": result.device,
        "addon_version": addon_version(),
    }
    return json_safe(record)


def failure_record(request: FitRequest, error: str, seconds: float = 0.0) -> dict[str, Any]:
    return {
        "name": request.object_name,
        "object": request.object_name,
        "model": request.model,
        "status": "failed",
        "error": error,
        "params": {},
        "initial_params": {},
        "initial_loss": None,
        "final_loss": None,
        "rmse_m": None,
        "max_error_m": None,
        "iterations": 0,
        "seconds": seconds,
        "warnings": [],
        "fit": list(request.fit),
        "target_frames": sorted(t.frame for t in request.targets),
    }


def write_back(ob: bpy.types.Object, prepared: PreparedFit, result: FitResult) -> dict[str, Any]:
    """Store the result on the object and apply the fitted values to its cloth modifier.

    Main thread, after a successful fit. A bake of the previous values is removed first:
    it would no longer show what the modifier does.
    """
    from . import bake

    record = result_record(prepared, result)
    if bake.is_baked(ob):
        bake.unbake_object(ob)
    ob.fit_to_target.result_json = json.dumps(record)
    # Revert goes back to what the modifier holds now, even if an earlier fit was applied
    ob.fit_to_target.applied = False
    apply_result(ob)
    return record


def fitted_values(record: dict[str, Any]) -> dict[str, Any]:
    """Values a result writes into the modifier: start values (presets) and fitted values."""
    values = dict(record.get("start_values") or {})
    values.update(record.get("params") or {})
    return values


def _modifier_values(mod: bpy.types.ClothModifier, names: list[str]) -> dict[str, Any]:
    return {name: _plain(getattr(mod.settings, name)) for name in names}


def _set_setting(mod: bpy.types.ClothModifier, name: str, value: Any) -> None:
    # JSON and presets may give 5.0 for an int field such as quality
    current = getattr(mod.settings, name)
    if isinstance(current, int) and not isinstance(current, bool):
        value = int(round(float(value)))
    elif isinstance(current, float):
        value = float(value)
    setattr(mod.settings, name, value)


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) else float(value)


def apply_result(ob: bpy.types.Object) -> dict[str, Any]:
    """Write the last result's values into the modifier, keeping the current ones for Revert."""
    mod = check_object(ob)
    s = ob.fit_to_target
    if not s.result_json:
        raise FitInputError(f"'{ob.name}' has no fit result to apply")
    values = fitted_values(json.loads(s.result_json))
    if s.applied:
        return values
    names = list(dict.fromkeys(list(PARAMETER_NAMES) + list(values)))
    s.previous_values_json = json.dumps(_modifier_values(mod, names))
    for name, value in values.items():
        _set_setting(mod, name, value)
    s.applied = True
    return values


def revert(ob: bpy.types.Object) -> dict[str, Any]:
    """Put back the modifier values from before the fitted ones were applied (and unbake)."""
    from . import bake

    mod = check_object(ob)
    s = ob.fit_to_target
    if not s.previous_values_json:
        raise FitInputError(f"'{ob.name}' has no previous values to revert to")
    previous = json.loads(s.previous_values_json)
    if bake.is_baked(ob):
        bake.unbake_object(ob)
    for name, value in previous.items():
        _set_setting(mod, name, value)
    s.applied = False
    return previous


# -- helpers ---------------------------------------------------------------------------------


def _a(kind: str) -> str:
    """'an empty', 'a curve': Blender's object type with its article."""
    word = kind.lower().replace("_", " ")
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
