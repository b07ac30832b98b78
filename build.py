"""Build the Fit to Target extension packages.

    python build.py                  download the wheels (warp-lang per platform, newton for all),
                                     build one zip per platform into dist/:
                                     fit_to_target-<version>-<platform>.zip, platform windows_x64,
                                     linux_x64 or macos_arm64
    python build.py --no-wheels      build fit_to_target-<version>.zip without wheels (tests, quick
                                     local installs)
    python build.py --output-dir D   write the zips into D instead of dist/

Packaging is done by Blender's own extension tool (``blender_ext.py``), the copy shipped inside the
``bpy`` wheel, and every zip is checked with its ``validate`` command.
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
MANIFEST = "blender_manifest.toml"
WARP_PACKAGE = "warp-lang"
WARP_VERSION = "1.19.0"
# Newton (its VBD solver runs the soft-body model) is pure Python: one wheel for every platform.
NEWTON_PACKAGE = "newton"
NEWTON_VERSION = "1.8.0"
PYTHON_VERSION = "3.11"  # Blender 4.2 .. 5.0 bundle Python 3.11.

# Blender platform -> pip platform tag of the warp-lang wheel for it.
PIP_PLATFORMS: dict[str, str] = {
    "windows-x64": "win_amd64",
    "linux-x64": "manylinux_2_28_x86_64",
    "macos-arm64": "macosx_11_0_arm64",
}

# Not copied into the temporary source tree a package is built from (the manifest excludes the rest).
_COPY_IGNORE_TOP = {".git", ".venv", "wheels", "dist", "out", ".pytest_cache", ".ruff_cache"}
# Never shipped from any folder: scenes a demo or a test run left in the tree (assets/demo.blend),
# Blender's backups and partial saves, and temporaries of interrupted writes.
_NEVER_SHIPPED = ("*.blend", "*.blend[0-9]", "*.blend@", ".*.fit-tmp-*", "__pycache__", "*.pyc")

_WHEELS_LIST_RE = re.compile(r"^wheels\s*=\s*\[.*?\]", re.MULTILINE | re.DOTALL)


class BuildError(RuntimeError):
    """A step of the build failed; the message says which and why."""


def find_blender_ext() -> Path:
    """Locate ``blender_ext.py`` inside the installed ``bpy`` package (without importing bpy)."""
    roots: list[str] = []
    spec = importlib.util.find_spec("bpy")
    if spec is not None and spec.submodule_search_locations:
        roots.extend(spec.submodule_search_locations)
    roots.extend(glob.glob(str(ROOT / ".venv" / "lib" / "python3*" / "site-packages" / "bpy")))
    for root in roots:
        pattern = os.path.join(root, "*", "scripts", "addons_core", "bl_pkg", "cli", "blender_ext.py")
        hits = sorted(glob.glob(pattern))
        if hits:
            return Path(hits[-1])
    raise BuildError("blender_ext.py not found: install the dev requirements (./dev setup) to get `bpy`")


def run_ext(args: list[str]) -> str:
    """Run a ``blender_ext.py`` subcommand; return its output or raise with it."""
    cmd = [sys.executable, str(find_blender_ext()), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise BuildError(f"blender_ext {args[0]} failed (exit {proc.returncode}):\n{output}")
    return output


def wheel_platform(filename: str) -> str | None:
    """Blender platform of a warp-lang wheel file name, or None if it is not one we ship."""
    tag = filename.removesuffix(".whl").split("-")[-1]
    if tag == "win_amd64":
        return "windows-x64"
    if tag.startswith("manylinux") and tag.endswith("_x86_64"):
        return "linux-x64"
    if tag.startswith("macosx_") and tag.endswith("_arm64"):
        return "macos-arm64"
    return None


def find_wheel(wheels_dir: Path, platform: str) -> Path | None:
    prefix = f"{WARP_PACKAGE.replace('-', '_')}-{WARP_VERSION}-"
    for path in sorted(wheels_dir.glob(prefix + "*.whl")):
        if wheel_platform(path.name) == platform:
            return path
    return None


def download_wheel(wheels_dir: Path, platform: str) -> Path:
    """Download the warp-lang wheel for one Blender platform unless it is already in ``wheels_dir``."""
    if (existing := find_wheel(wheels_dir, platform)) is not None:
        return existing
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        PYTHON_VERSION,
        "--platform",
        PIP_PLATFORMS[platform],
        "--dest",
        str(wheels_dir),
        f"{WARP_PACKAGE}=={WARP_VERSION}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"pip download for {platform} failed:\n{(proc.stdout + proc.stderr).strip()}")
    if (path := find_wheel(wheels_dir, platform)) is None:
        raise BuildError(f"pip download for {platform} produced no matching wheel in {wheels_dir}")
    return path


def download_pure_wheel(wheels_dir: Path, package: str, version: str) -> Path:
    """Download a pure-Python (``py3-none-any``) wheel unless it is already in ``wheels_dir``."""
    pattern = f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
    existing = sorted(wheels_dir.glob(pattern))
    if existing:
        return existing[0]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--dest", str(wheels_dir), f"{package}=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"pip download of {package} failed:\n{(proc.stdout + proc.stderr).strip()}")
    found = sorted(wheels_dir.glob(pattern))
    if not found:
        raise BuildError(f"pip download of {package} produced no {pattern} in {wheels_dir}")
    return found[0]


def download_wheels(wheels_dir: Path, platforms: list[str]) -> list[Path]:
    wheels_dir.mkdir(parents=True, exist_ok=True)
    wheels = [download_wheel(wheels_dir, platform) for platform in platforms]
    return wheels + [download_pure_wheel(wheels_dir, NEWTON_PACKAGE, NEWTON_VERSION)]


def read_manifest(source_dir: Path) -> dict:
    with open(source_dir / MANIFEST, "rb") as fh:
        return tomllib.load(fh)


def write_manifest_wheels(source_dir: Path, wheels: list[str]) -> None:
    """Replace the manifest's ``wheels = [...]`` list (paths relative to the source dir)."""
    path = source_dir / MANIFEST
    text = path.read_text(encoding="utf-8")
    if not _WHEELS_LIST_RE.search(text):
        raise BuildError(f"{path}: no top-level `wheels = [...]` list to rewrite")
    items = "".join(f'  "{w}",\n' for w in wheels)
    new_list = f"wheels = [\n{items}]" if wheels else "wheels = []"
    new_text = _WHEELS_LIST_RE.sub(lambda _: new_list, text, count=1)
    if new_text != text:
        path.write_text(new_text, encoding="utf-8")
    read_manifest(source_dir)  # still valid TOML


def validate(zip_path: Path) -> None:
    """Run ``blender_ext.py validate`` on a package; raise BuildError if it is rejected."""
    run_ext(["validate", str(zip_path)])


def package_name(manifest: dict, platform: str | None = None) -> str:
    """The zip Blender's tool writes: ``<id>-<version>[-<platform with _>].zip``."""
    stem = f"{manifest['id']}-{manifest['version']}"
    return f"{stem}-{platform.replace('-', '_')}.zip" if platform else f"{stem}.zip"


def build_packages(source_dir: Path, output_dir: Path, split_platforms: bool) -> list[Path]:
    """Build with ``blender_ext.py build``; return the zips it wrote, each validated."""
    manifest = read_manifest(source_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    args = ["build", "--source-dir", str(source_dir), "--output-dir", str(output_dir)]
    if split_platforms:
        args.append("--split-platforms")
    run_ext(args)
    platforms = manifest["platforms"] if split_platforms else [None]
    zips = [output_dir / package_name(manifest, platform) for platform in platforms]
    for zip_path in zips:
        if not zip_path.is_file():
            raise BuildError(f"expected package not written: {zip_path}")
        validate(zip_path)
    return zips


def _copy_ignore(directory: str, names: list[str]) -> set[str]:
    ignored = {n for n in names if any(fnmatch.fnmatch(n, pattern) for pattern in _NEVER_SHIPPED)}
    if Path(directory).resolve() == ROOT.resolve():
        ignored |= _COPY_IGNORE_TOP & set(names)
    return ignored


def stage_source(folder: Path, wheels: list[Path]) -> Path:
    """A clean copy of the source tree in ``folder`` to build from, with ``wheels`` copied
    into its ``wheels/`` and listed in its manifest. The checkout itself is never changed."""
    source = folder / "src"
    shutil.copytree(ROOT, source, ignore=_copy_ignore, symlinks=True)
    if wheels:
        (source / "wheels").mkdir()
        for wheel in wheels:
            shutil.copy2(wheel, source / "wheels" / wheel.name)
    write_manifest_wheels(source, [f"./wheels/{w.name}" for w in wheels])
    return source


def build_without_wheels(output_dir: Path) -> Path:
    """Build one zip with an empty wheels list, from a temporary copy of the source tree."""
    with tempfile.TemporaryDirectory(prefix="fit_to_target_build_") as tmp:
        source = stage_source(Path(tmp), [])
        (zip_path,) = build_packages(source, output_dir, split_platforms=False)
        return zip_path


def build_with_wheels(output_dir: Path) -> list[Path]:
    """Download the wheels, then build one zip per platform from a copy listing them."""
    platforms = list(read_manifest(ROOT)["platforms"])
    unknown = sorted(set(platforms) - set(PIP_PLATFORMS))
    if unknown:
        raise BuildError(f"no warp-lang wheel mapping for manifest platforms {unknown}; extend PIP_PLATFORMS")
    wheels = download_wheels(ROOT / "wheels", platforms)
    with tempfile.TemporaryDirectory(prefix="fit_to_target_build_") as tmp:
        return build_packages(stage_source(Path(tmp), wheels), output_dir, split_platforms=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output-dir", type=Path, default=ROOT / "dist", help="where to write the zips")
    parser.add_argument("--no-wheels", action="store_true", help="one zip without bundled wheels")
    args = parser.parse_args(argv)
    output_dir = args.output_dir.resolve()
    try:
        zips = [build_without_wheels(output_dir)] if args.no_wheels else build_with_wheels(output_dir)
    except BuildError as ex:
        print(f"build.py: error: {ex}", file=sys.stderr)
        return 1
    for zip_path in zips:
        print(f"built and validated: {zip_path} ({zip_path.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
