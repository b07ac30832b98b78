"""The pictures of the artist guide (docs/artist-guide.md), made from a real scene.

    .venv/bin/python tools/guide_pictures.py --out docs/images

builds the demo scene (``assets/make_demo.py``) with the add-on registered, adds its targets
with *Add Current Frame*, fits it with the panel's operator and writes into ``--out``:

- ``guide-panel-before.svg``, ``guide-panel-result.svg``: diagrams of the Fit tab before the
  fit and after it (:mod:`panel_diagram`), drawn from the draw calls the real panel classes
  make for that state; the result's file keeps the state it shows, so the guide's test can
  draw it again;
- ``guide-loss-curve.png``: the fit's loss curve, the picture the add-on draws;
- ``guide-error-before.png``, ``guide-error-after.png``: Cycles renders (CPU) of the cloth
  coloured by *Show Fit Error* with the start values and with the fitted ones.

The Blender side lives with the tests' scenes (``tests/blender/guide_scene.py`` and
``guide_renders.py``), which this tool imports: it needs ``bpy`` and ``warp`` (``./dev
setup``) and takes a minute or two. PNGs are written here (no metadata, no clock), so the
same pixels give the same file.
"""

from __future__ import annotations

import argparse
import struct
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
from panel_diagram import diagram_svg

REPO_ROOT = Path(__file__).resolve().parents[1]
BEFORE_SVG = "guide-panel-before.svg"
RESULT_SVG = "guide-panel-result.svg"
CURVE_PNG = "guide-loss-curve.png"
ERROR_PNGS = ("guide-error-before.png", "guide-error-after.png")
CURVE_PX = (480, 200)  # width, height
ERROR_FRAME = 30  # the demo's last target frame
BEFORE_TITLE = "The Fit tab with three targets added, before the fit (a diagram of the panel)"
RESULT_TITLE = "The Fit tab after the fit: the Result sub-panel (a diagram of the panel)"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_bytes(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of ``rgb`` (height, width, 3) uint8, top row first; each row filtered
    by its left neighbour's difference ("Sub"), which smooth pictures compress well with."""
    height, width, _ = rgb.shape
    rows = rgb.astype(np.uint8).reshape(height, width * 3)
    sub = rows.copy()
    sub[:, 3:] = rows[:, 3:] - rows[:, :-3]  # uint8 arithmetic wraps, as the format wants
    raw = np.concatenate([np.ones((height, 1), dtype=np.uint8), sub], axis=1).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        _PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def read_png(path: Path) -> np.ndarray:
    """The pixels of a PNG :func:`png_bytes` wrote, (height, width, 3) uint8, top row first."""
    data = path.read_bytes()
    if not data.startswith(_PNG_SIGNATURE):
        raise ValueError(f"{path} is not a PNG")
    at, header, compressed = len(_PNG_SIGNATURE), b"", b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        header = body if kind == b"IHDR" else header
        compressed += body if kind == b"IDAT" else b""
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if (depth, colour, interlace) != (8, 2, 0):
        raise ValueError(f"{path}: not an 8-bit RGB PNG of this tool's")
    rows = np.frombuffer(zlib.decompress(compressed), dtype=np.uint8).reshape(height, width * 3 + 1)
    filters, pixels = rows[:, 0], rows[:, 1:].copy()
    if not set(filters.tolist()) <= {0, 1}:
        raise ValueError(f"{path}: rows filtered otherwise than this tool does")
    for channel in range(3):  # "Sub": each byte adds the one three to its left
        sums = np.cumsum(pixels[:, channel::3], axis=1, dtype=np.uint8)
        pixels[:, channel::3] = np.where(filters[:, None] == 1, sums, pixels[:, channel::3])
    return pixels.reshape(height, width, 3)


def write_pictures(out: Path) -> list[Path]:
    """Build, fit and draw the guide's scene (see the module docstring); the files written."""
    sys.path[:0] = [str(REPO_ROOT / "tests" / "blender")]
    import blender_env  # an isolated Blender profile, before bpy is imported

    blender_env.import_addon_package().register()
    import guide_renders
    import guide_scene

    out.mkdir(parents=True, exist_ok=True)
    written = []

    def write(name: str, data: bytes) -> None:
        (out / name).write_bytes(data)
        written.append(out / name)

    with tempfile.TemporaryDirectory(prefix="fit_to_target_guide_") as tmp:
        cloth = guide_scene.build_guide_scene(Path(tmp))
        context = guide_scene.SidebarContext()
        before = guide_scene.record_sidebar(context, guide_scene.OPEN_BEFORE)
        write(BEFORE_SVG, diagram_svg(before, BEFORE_TITLE).encode())
        record = guide_renders.fit(cloth)
        write(CURVE_PNG, png_bytes(guide_scene.curve_rgb(record, *CURVE_PX)))
        stale = guide_scene.changed_parts(cloth)
        if stale:
            raise RuntimeError(f"the fit's result is out of date right after it ({', '.join(stale)})")
        pictures = guide_renders.error_pictures(cloth, ERROR_FRAME, Path(tmp))
        for name, rgb in zip(ERROR_PNGS, pictures, strict=True):
            write(name, png_bytes(rgb))
        state = guide_scene.fit_state(cloth)
        guide_scene.restore_fit_state(cloth, state)  # exactly what the file keeps
        result = guide_scene.record_sidebar(context, guide_scene.OPEN_RESULT)
        write(RESULT_SVG, diagram_svg(result, RESULT_TITLE, {"fit_to_target": state}).encode())
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "docs" / "images", help="folder to write into"
    )
    args = parser.parse_args(argv)
    for path in write_pictures(args.out):
        print(f"{path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
