"""A fit problem as one file (npz with a JSON header), so fits run without Blender.

Arrays are stored with ``allow_pickle=False`` and read back the same way: a problem file
never executes code.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ...io import atomic_write
from ...mesh import VERTEX_GROUP_FIELDS, ClothMesh
from ...models import DEFAULT_MODEL, get_model
from ...tracks.camera import Intrinsics
from ...tracks.targets import FootageTargets, TrackBinding
from .maps import MapSpec
from .problem import FitProblem, Target

_MARKER_ARRAYS = ("marker_frame", "marker_track", "marker_pixel", "marker_weight")


def problem_metadata(problem: FitProblem) -> dict[str, Any]:
    """The problem apart from its arrays, as plain JSON data (the settings as their
    ``ModelSettings.as_dict()``, what ``Model.settings_from_dict`` reads back)."""
    return {
        "model": problem.model,
        "params": problem.model_settings.as_dict(),
        "fit": list(problem.free_parameters),
        "ties": dict(problem.ties),
        "bounds": {k: list(v) for k, v in problem.bounds.items()},
        "start_frame": problem.start_frame,
        "loss": problem.loss,
        "target_frames": problem.target_frames,
    }


def _save_tracks(tracks: FootageTargets, arrays: dict[str, np.ndarray]) -> dict:
    """Footage targets into ``arrays`` (markers, cameras, bindings) and their JSON header."""
    for name in _MARKER_ARRAYS:
        arrays[f"tracks_{name}"] = np.asarray(getattr(tracks, name))
    frames = sorted(tracks.cameras)
    arrays["tracks_camera_frames"] = np.array(frames, dtype=np.int64)
    arrays["tracks_cameras"] = np.array([tracks.cameras[f] for f in frames], dtype=np.float64).reshape(
        -1, 4, 4
    )
    arrays["tracks_binding_vertices"] = np.array([b.vertices for b in tracks.bindings], dtype=np.int64)
    arrays["tracks_binding_barycentric"] = np.array(
        [b.barycentric for b in tracks.bindings], dtype=np.float64
    )
    return {
        "intrinsics": asdict(tracks.intrinsics),
        "track_names": tracks.track_names(),
        "huber_px": tracks.huber_px,
        "clip": tracks.clip,
        "camera": tracks.camera,
        "camera_error_px": tracks.camera_error_px,
    }


def _load_tracks(meta: dict, arrays: dict[str, np.ndarray]) -> FootageTargets:
    intrinsics = dict(meta["intrinsics"])
    intrinsics["principal_px"] = tuple(intrinsics["principal_px"])
    intrinsics["coefficients"] = tuple(intrinsics["coefficients"])
    bindings = [
        TrackBinding(name, tuple(int(v) for v in vertices), tuple(float(w) for w in bary))
        for name, vertices, bary in zip(
            meta["track_names"],
            arrays["tracks_binding_vertices"],
            arrays["tracks_binding_barycentric"],
            strict=True,
        )
    ]
    cameras = dict(zip(arrays["tracks_camera_frames"].tolist(), arrays["tracks_cameras"], strict=True))
    return FootageTargets(
        Intrinsics(**intrinsics),
        bindings,
        cameras,
        *(arrays[f"tracks_{name}"] for name in _MARKER_ARRAYS),
        huber_px=float(meta["huber_px"]),
        clip=meta.get("clip", ""),
        camera=meta.get("camera", ""),
        camera_error_px=meta.get("camera_error_px"),
    )


FORMAT_VERSION = 1


def _save_maps(maps: list[MapSpec], arrays: dict[str, np.ndarray]) -> list[dict]:
    """The maps' regions into ``arrays`` (one weight array each) and their JSON header."""
    header = []
    for k, spec in enumerate(maps):
        for r, weights in enumerate(spec.regions.values()):
            arrays[f"map{k}_region{r}"] = np.asarray(weights, dtype=np.float64)
        header.append({"kind": spec.kind, "regions": list(spec.regions), "smoothness": spec.smoothness})
    return header


def _load_maps(header: list[dict], arrays: dict[str, np.ndarray]) -> list[MapSpec]:
    return [
        MapSpec(
            kind=entry["kind"],
            regions={name: arrays[f"map{k}_region{r}"] for r, name in enumerate(entry["regions"])},
            smoothness=float(entry["smoothness"]),
        )
        for k, entry in enumerate(header)
    ]


def save_problem(problem: FitProblem, path: str | os.PathLike) -> Path:
    """Write ``problem`` to ``path`` (.npz), atomically."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {
        "vertices": problem.mesh.vertices,
        "polygon_vertices": problem.mesh.polygon_vertices,
        "polygon_offsets": problem.mesh.polygon_offsets,
        "edges": problem.mesh.edges,
        "pin_weights": problem.mesh.pin_weights,
    }
    for name in VERTEX_GROUP_FIELDS:
        weights = getattr(problem.mesh, name)
        if weights is not None:
            arrays[name] = np.asarray(weights, dtype=np.float64)
    if problem.goals is not None:
        arrays["goals"] = np.asarray(problem.goals, dtype=np.float64)
    for k, t in enumerate(problem.targets):
        arrays[f"target{k}_positions"] = np.asarray(t.positions, dtype=np.float64)
        if t.triangles is not None:
            arrays[f"target{k}_triangles"] = np.asarray(t.triangles, dtype=np.int32)
        if t.weights is not None:
            arrays[f"target{k}_weights"] = np.asarray(t.weights, dtype=np.float64)
    meta = {"format": "fit_to_target.problem", "version": FORMAT_VERSION, **problem_metadata(problem)}
    if problem.tracks is not None:
        meta["tracks"] = _save_tracks(problem.tracks, arrays)
    if problem.maps:
        meta["maps"] = _save_maps(problem.maps, arrays)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    return atomic_write(path, lambda f: np.savez_compressed(f, **arrays))


def load_problem(path: str | os.PathLike) -> FitProblem:
    """Read a problem file; ValueError with the reason when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"problem file {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as e:  # zip or npy errors of every kind
        raise ValueError(f"{path} is not a problem file: {e}") from e
    try:
        meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
    except (KeyError, ValueError) as e:
        raise ValueError(f"{path} has no readable header") from e
    if meta.get("format") != "fit_to_target.problem" or meta.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported problem format {meta.get('format')} v{meta.get('version')}")
    # files written before models had names are all blender_cloth problems
    model_name = meta.get("model", DEFAULT_MODEL)
    try:
        model = get_model(model_name)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e
    try:
        mesh = ClothMesh(
            arrays["vertices"],
            arrays["polygon_vertices"],
            arrays["polygon_offsets"],
            arrays["edges"],
            arrays["pin_weights"],
            **{name: arrays.get(name) for name in VERTEX_GROUP_FIELDS},
        )
        params = model.settings_from_dict(meta["params"])
        tracks = _load_tracks(meta["tracks"], arrays) if "tracks" in meta else None
        frames = [] if tracks is not None else meta["target_frames"]
        targets = [
            Target(
                frame=int(frame),
                positions=arrays[f"target{k}_positions"],
                triangles=arrays.get(f"target{k}_triangles"),
                weights=arrays.get(f"target{k}_weights"),
            )
            for k, frame in enumerate(frames)
        ]
        return FitProblem(
            mesh=mesh,
            model_settings=params,
            targets=targets,
            free_parameters=list(meta["fit"]),
            ties=dict(meta.get("ties", {})),
            bounds={k: tuple(v) for k, v in meta.get("bounds", {}).items()},
            start_frame=int(meta.get("start_frame", 1)),
            goals=arrays.get("goals"),
            loss=meta.get("loss", "auto"),
            model=model_name,
            tracks=tracks,
            maps=_load_maps(meta.get("maps", []), arrays),
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path}: incomplete problem file ({e})") from e
