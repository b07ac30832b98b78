"""The commands the docs show, run as a new user would type them: every ```console block of
README.md and docs/ marked ``<!-- doc-test: run -->`` runs, in page order (README first), from
a copy of the checkout whose outputs go to a temporary folder, and must exit 0. Blocks marked
``<!-- doc-test: skip REASON -->`` are not run, and must name a known reason
(``tools/doc_checks.py`` reads the markers; ``tests/core/test_docs.py`` checks that every block
has one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from addon_scenes import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
import doc_checks  # noqa: E402

# what a checkout holds that a run must not write into or need: outputs go to the copy's own out/
NOT_LINKED = {".git", "out", "dist", "wheels", ".pytest_cache", ".ruff_cache"}
TIMEOUT_S = 900


def blocks() -> list[doc_checks.CommandBlock]:
    return [b for page in doc_checks.doc_pages(REPO_ROOT) for b in doc_checks.command_blocks(page)[0]]


def checkout_copy(folder: Path) -> Path:
    """A checkout of links to this one's files (the same .venv), with an empty out/."""
    folder.mkdir()
    for entry in REPO_ROOT.iterdir():
        if entry.name not in NOT_LINKED:
            (folder / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    return folder


def test_the_commands_the_docs_show_run(tmp_path: Path) -> None:
    root = checkout_copy(tmp_path / "checkout")
    env = {**os.environ, "WARP_CACHE_PATH": os.environ["WARP_CACHE_PATH"]}
    done: set[str] = set()
    failed = []
    for b in (b for b in blocks() if b.run):
        for command in b.commands:
            if command in done:  # the README and a page show the same command: once is enough
                continue
            done.add(command)
            proc = subprocess.run(
                ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
            )
            if proc.returncode != 0:
                tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
                failed.append(f"{b.page}:{b.line}: exit {proc.returncode}: {command}\n{tail}")
    assert done, "no command of the docs is marked to run"
    assert not failed, "\n\n".join(failed)
    assert (root / "out" / "demo" / "demo_fitted.blend").is_file()  # the demo wrote where it says


def test_every_command_not_run_says_why() -> None:
    """A block the suite does not run names a known reason (a GPU, a Blender binary, the
    network, a long run, or another block that covers it): none is left out silently."""
    held = [b for b in blocks() if not b.run]
    unknown = [f"{b.page}:{b.line}: {b.reason!r}" for b in held if b.reason not in doc_checks.SKIP_REASONS]
    assert not unknown, "unknown reasons not to run: " + "; ".join(unknown)
    assert all(b.commands for b in held)
