"""Generate the demo scene (``out/demo/demo.blend`` by default, outside the source tree).

A 1 m cloth of 12 x 12 vertices, held horizontally by two clamped rows along one edge (a
cantilever: it droops and swings under gravity, so both stretch and bending stiffness show
in its motion). Three target meshes record where Blender's own cloth solver puts it at
frames 10, 20 and 30 with stiffer settings (``TRUE_VALUES``); the cloth modifier is then
reset to Blender's defaults, so the fit starts from values it has to correct and is never
told the true ones.

    python assets/make_demo.py [OUT.blend]        # with the bpy module (./dev demo runs this)
"""

from __future__ import annotations

import sys
from pathlib import Path

import bpy
import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATH = REPO_ROOT / "out" / "demo" / "demo.blend"

GRID = 12  # vertices per side
SIZE_M = 1.0
HEIGHT_M = 1.0
CLAMPED_ROWS = 2
FRAME_END = 40  # scene end and cloth cache end
TARGET_FRAMES = (10, 20, 30)
# What produced the targets (the fit starts from Blender's defaults: 15, 15, 0.5).
TRUE_VALUES = {"tension_stiffness": 40.0, "compression_stiffness": 40.0, "bending_stiffness": 2.0}


def grid(n: int = GRID, size: float = SIZE_M, height: float = HEIGHT_M) -> tuple[np.ndarray, list[list[int]]]:
    """Vertices (row-major, y rows) and quads of an n x n grid centred over the origin."""
    xs = np.linspace(-size / 2, size / 2, n)
    verts = np.array([(x, y, height) for y in xs for x in xs])
    faces = [
        [j * n + i, j * n + i + 1, (j + 1) * n + i + 1, (j + 1) * n + i]
        for j in range(n - 1)
        for i in range(n - 1)
    ]
    return verts, faces


def _mesh_object(name: str, verts: np.ndarray, faces: list[list[int]]) -> bpy.types.Object:
    # from_pydata keeps vertex, edge and face order stable between runs (bmesh operators may not)
    me = bpy.data.meshes.new(name)
    me.from_pydata(verts.tolist(), [], faces)
    me.update()
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    return ob


def _world_positions(ob: bpy.types.Object) -> np.ndarray:
    ob_eval = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    co = np.empty(len(ob_eval.data.vertices) * 3, dtype=np.float32)
    ob_eval.data.vertices.foreach_get("co", co)
    m = np.array(ob_eval.matrix_world)
    return co.reshape(-1, 3).astype(np.float64) @ m[:3, :3].T + m[:3, 3]


def build_demo(path: str | Path = DEFAULT_PATH) -> Path:
    """Build the demo in the current Blender session (the add-on must be registered) and save it."""
    if not hasattr(bpy.types.Object, "fit_to_target"):
        raise RuntimeError("register the Fit to Target add-on first")
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAME_END

    verts, faces = grid()
    cloth = _mesh_object("Cloth", verts, faces)
    clamp = cloth.vertex_groups.new(name="Clamp")
    rows = np.unique(np.round(verts[:, 1], 9))[-CLAMPED_ROWS:]
    clamp.add(np.flatnonzero(np.isin(np.round(verts[:, 1], 9), rows)).tolist(), 1.0, "REPLACE")
    mod = cloth.modifiers.new("Cloth", "CLOTH")
    mod.settings.vertex_group_mass = clamp.name
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, FRAME_END
    defaults = {name: getattr(mod.settings, name) for name in TRUE_VALUES}

    # Blender's own solver, stepped frame by frame from the cache start, makes the targets
    for name, value in TRUE_VALUES.items():
        setattr(mod.settings, name, value)
    shapes = {}
    for frame in range(1, max(TARGET_FRAMES) + 1):
        scene.frame_set(frame)
        if frame in TARGET_FRAMES:
            shapes[frame] = _world_positions(cloth)
    targets = bpy.data.collections.new("Targets")
    scene.collection.children.link(targets)
    target_objects = {}
    for frame, positions in shapes.items():
        ob = _mesh_object(f"Target.f{frame:03d}", positions, faces)
        scene.collection.objects.unlink(ob)
        targets.objects.link(ob)
        ob.display_type = "WIRE"
        ob.hide_render = True
        target_objects[frame] = ob

    # the fit starts from Blender's defaults and knows only the target shapes
    for name, value in defaults.items():
        setattr(mod.settings, name, value)
    s = cloth.fit_to_target
    for frame, ob in target_objects.items():
        item = s.targets.add()
        item.kind, item.object, item.frame = "OBJECT", ob, frame
    s.fit_tension_stiffness = True
    s.fit_bending_stiffness = True
    s.tie_compression = True

    scene.frame_set(1)
    bpy.context.view_layer.objects.active = cloth
    cloth.select_set(True)
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    bpy.ops.wm.save_as_mainfile(filepath=str(path), compress=True)
    return path


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO_ROOT))
    import batch  # the repository's headless entry point knows how to load the add-on

    batch.load_addon()
    path = build_demo(argv[0] if argv else DEFAULT_PATH)
    truth = ", ".join(f"{k} {v:g}" for k, v in TRUE_VALUES.items())
    print(f"demo scene: {path} (targets at frames {', '.join(map(str, TARGET_FRAMES))}; made with {truth})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
