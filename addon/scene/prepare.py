"""Read one fit's inputs from the scene (main thread): the object's mesh, its pin goals
from the cache start to the last target, its settings, and the targets."""

from __future__ import annotations

import threading

import bpy
import numpy as np

from ...warp_core.errors import one_line
from ...warp_core.fit import FitProblem, FitResult, FitSettings, ProgressListener, Target, fit
from ...warp_core.fit.optimizers.base import ProgressCallback
from ...warp_core.fit.problem.rules import auto_loss
from ...warp_core.mesh import ClothMesh
from ..errors import FitInputError, setting
from ..mesh_read import object_matrix, triangles, world_positions
from ..models.base import SceneModel
from ..models.registry import scene_model
from ..request import FitRequest, PreparedFit, TargetSpec
from ..warp_setup import choose_device, resolve_device
from .checks import check_request, check_rest_shape, check_scale, unmodeled_warnings
from .footage import check_sees_cloth, read_camera, read_footage
from .map_inputs import map_specs
from .steps import StepGenerator, run_blocking

# a target as read: world positions, triangles (surface loss), edges (object targets)
_Read = tuple[np.ndarray, np.ndarray | None, np.ndarray | None]


def prepare_fit(
    scene: bpy.types.Scene,
    ob: bpy.types.Object,
    request: FitRequest,
    depsgraph: bpy.types.Depsgraph | None = None,
) -> PreparedFit:
    """Export the cloth, its pin goals (every frame from the cache start to the last target)
    and the targets. Main thread; the scene frame and modifier flags are restored. The
    blocking run of :func:`prepare_fit_steps`."""
    return run_blocking(prepare_fit_steps(scene, ob, request, depsgraph))


def prepare_fit_steps(
    scene: bpy.types.Scene,
    ob: bpy.types.Object,
    request: FitRequest,
    depsgraph: bpy.types.Depsgraph | None = None,
) -> StepGenerator[PreparedFit]:
    """:func:`prepare_fit` as stepped work (``scene/steps.py``): a ``Step`` per frame of the
    goal pass ("frame 37 of 250"), the PreparedFit its value, FitInputError its refusal.

    A modal operator makes ``run = SteppedRun(prepare_fit_steps(scene, ob, request))`` in
    ``invoke`` and calls ``run.advance(budget_s)`` on each timer event, returning
    ``{"RUNNING_MODAL"}`` for every other event but Esc meanwhile (the scene sits at another
    frame); once ``run.finished``, ``run.value`` is the PreparedFit or ``run.error`` the
    FitInputError to report. Esc is ``run.cancel()``: the scene frame, subframe and modifier
    flags are as they were at once. Several objects are one generator that runs
    ``yield from within(prepare_fit_steps(...), offset, span, total)`` for each (one bar over
    all of them)."""
    mod, start, end = check_request(scene, ob, request)
    model = scene_model(request.model)
    resolve_device(request.device)  # a device that does not exist is refused before the scene is read
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    last = max((t.frame for t in request.targets), default=start)
    footage, wanted, notes = None, set(), []
    by_frame: dict[int, list[tuple[int, TargetSpec]]] = {}
    for k, t in enumerate(request.targets):
        by_frame.setdefault(t.frame, []).append((k, t))
    read: dict[int, _Read] = {}
    surface = request.loss in ("surface", "auto")  # auto decides once the targets are read

    # what the model reads from the scene around the object on the same frames (colliders)
    sampler = model.frame_sampler(scene, ob, mod, depsgraph)

    def read_targets(k_frame: int, frame: float) -> None:
        for k, t in by_frame.get(int(frame), ()):
            read[k] = _read_target(ob, t, depsgraph, surface)
        if int(frame) in wanted:
            read_camera(scene, footage, int(frame))
        sampler(k_frame, frame)

    saved = scene.frame_current, scene.frame_subframe
    try:
        # the cloth starts from its input mesh at the cache start frame
        scene.frame_set(start)
        check_rest_shape(ob, request)  # shape-key values as they are at the start frame
        try:
            mesh = model.read_geometry(ob, depsgraph)
        except ValueError as e:
            raise FitInputError(one_line(e)) from e
        try:
            model.check_geometry(mesh)
        except ValueError as e:
            check_scale(ob, depsgraph)  # a zero scale is the reason when there is one
            raise FitInputError(f"'{ob.name}': {one_line(e)}") from e
        if request.footage is not None:
            footage, marker_frames = read_footage(
                scene, ob, request.footage, mesh.vertices, mesh.triangles(), (start, end), notes
            )
            wanted, last = set(marker_frames), max(marker_frames)
        frames = list(range(start, last + 1))
        try:
            with sampler:
                goals, _ = yield from model.sample_goals_steps(
                    ob, depsgraph, scene, frames, on_frame=read_targets
                )
        except ValueError as e:
            raise FitInputError(one_line(e)) from e
        if footage is not None:
            check_sees_cloth(footage, mesh.vertices, ob.name, start)
    finally:
        scene.frame_set(saved[0], subframe=saved[1])

    counts = [len(read[k][0]) for k in range(len(request.targets))]
    loss = auto_loss(request.loss, counts, mesh.vertex_count, has_footage=footage is not None)
    targets = [] if footage is not None else _targets(request, read, mesh, loss == "surface")
    try:
        params = sampler.settings(model.read_settings(mod, scene))
    except ValueError as e:
        raise FitInputError(f"'{ob.name}': {one_line(e)}") from e
    modifier_values = {name: getattr(params, name) for name in model.settings_fields}
    try:
        start_params = params.replace(**request.start_values)
        start_params.validate()
    except (ValueError, TypeError) as e:
        raise FitInputError(f"start values: {one_line(e)}") from e
    problem = FitProblem(
        mesh=mesh,
        model_settings=start_params,
        targets=targets,
        free_parameters=list(request.fit),
        ties=dict(request.ties),
        start_frame=start,
        goals=goals,
        loss=loss,
        model=model.name,
        tracks=footage,
        maps=map_specs(ob, request, mesh.vertex_count),
    )
    try:
        problem.validate()
    except ValueError as e:
        raise FitInputError(f"'{ob.name}': {one_line(e)}") from e
    settings = FitSettings(
        device=sized_device(request.device, model, mesh.vertex_count),
        max_iterations=int(request.max_iterations),
        time_budget_s=request.time_budget_s,
        tolerance_m=request.tolerance_m,
        tolerance_px=request.tolerance_px,
        precision=model.precision,
    )
    warnings = unmodeled_warnings(scene, ob, mod, request) + notes
    return PreparedFit(request, problem, settings, modifier_values, (start, end), warnings)


def _targets(request: FitRequest, read: dict[int, _Read], mesh: ClothMesh, surface: bool) -> list[Target]:
    """The read targets in request order, checked against the loss."""
    targets = []
    vertex_count = mesh.vertex_count
    for k, t in enumerate(request.targets):
        positions, tris, edges = read[k]
        bad = np.flatnonzero(~np.isfinite(positions).all(axis=1))
        if len(bad):
            listed = ", ".join(str(v) for v in bad[:5]) + (", ..." if len(bad) > 5 else "")
            which = f"vertex {listed}" if len(bad) == 1 else f"{len(bad)} vertices: {listed}"
            raise FitInputError(
                f"target {t.describe()} has coordinates that are not finite numbers (inf or nan) at "
                f"{which}: fix the target mesh or remove the target"
            )
        if not surface and len(positions) == vertex_count:
            _check_vertex_order(t, edges, mesh.edges, vertex_count)
        if not surface and len(positions) != vertex_count:
            raise FitInputError(
                f"target {t.describe()} has {len(positions)} vertices, the cloth has {vertex_count}: "
                "a target of another topology needs the surface loss "
                f"({setting('Loss: Surface in the Solver panel', '--loss surface or --loss auto')})"
            )
        if len(positions) == 0:
            raise FitInputError(f"target {t.describe()} has no vertices")
        targets.append(Target(t.frame, positions, tris if surface else None))
    if surface:
        for t, target in zip(request.targets, targets, strict=True):
            if target.triangles is None or len(target.triangles) == 0:
                raise FitInputError(f"target {t.describe()} has no faces: the Surface loss needs a surface")
    return targets


def _check_vertex_order(t: TargetSpec, edges: np.ndarray | None, cloth_edges: np.ndarray, n: int) -> None:
    """A target the vertex loss compares vertex by vertex has the cloth's vertex order: most
    of the cloth's edges join the same two vertices in the target (a target of the cloth's
    topology in another order, as some exporters write it, has almost none)."""
    if edges is None or len(edges) == 0 or len(cloth_edges) == 0:
        return  # a shape key of the cloth, or points without edges: nothing to compare

    def keys(e: np.ndarray) -> np.ndarray:
        pairs = np.sort(np.asarray(e, dtype=np.int64).reshape(-1, 2), axis=1)
        return pairs[:, 0] * n + pairs[:, 1]

    shared = int(np.isin(keys(cloth_edges), keys(edges)).sum())
    if shared < 0.5 * len(cloth_edges):
        raise FitInputError(
            f"target {t.describe()} has the cloth's {n} vertices but not in the cloth's vertex order "
            f"(only {shared} of the cloth's {len(cloth_edges)} edges join the same two vertices in it): "
            "the vertex loss compares vertex by vertex; make the target from the cloth's mesh, or use "
            f"the surface loss ({setting('Loss: Surface in the Solver panel', '--loss surface')})"
        )


def _read_target(
    cloth: bpy.types.Object, t: TargetSpec, depsgraph: bpy.types.Depsgraph, surface: bool
) -> _Read:
    """World positions, triangles (for the surface loss) and edges (None for a shape key of
    the cloth: its own) of a target at the current frame."""
    if t.shape_key:
        block = cloth.data.shape_keys.key_blocks[t.shape_key]
        positions = world_positions(block.data, object_matrix(cloth.evaluated_get(depsgraph)))
        return positions, triangles(cloth.data) if surface else None, None
    tob_eval = bpy.data.objects[t.object_name].evaluated_get(depsgraph)
    me = tob_eval.to_mesh()
    try:
        positions = world_positions(me.vertices, object_matrix(tob_eval))
        edges = np.empty(len(me.edges) * 2, dtype=np.int32)
        me.edges.foreach_get("vertices", edges)
        return positions, triangles(me) if surface else None, edges.reshape(-1, 2)
    finally:
        tob_eval.to_mesh_clear()


def run_fit(
    prepared: PreparedFit,
    progress: ProgressCallback | ProgressListener | None = None,
    cancel: threading.Event | None = None,
) -> FitResult:
    """Blocking fit on the calling thread (batch, ``execute``). Raises warp_core's FitError."""
    return fit(prepared.problem, prepared.settings, progress=progress, cancel=cancel)


def sized_device(requested: str, model: SceneModel, vertex_count: int) -> str:
    """The device a fit or bake of ``vertex_count`` vertices runs on: ``requested`` as asked,
    or for Auto the CPU or a GPU by the measured crossover where the model has one."""
    sized = vertex_count if model.auto_device_by_size else None
    return choose_device(requested, sized, precision=model.precision).device
