"""The rules on what a fit is asked to do, shared by ``FitProblem.validate`` and the add-on's
input checks: which parameters, which kind of targets, which loss.

Pure functions: each raises ValueError with a message that says what to change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...models import get_model

__all__ = [
    "LOSSES",
    "MESH_LOSSES",
    "auto_loss",
    "check_loss_name",
    "check_parameters",
    "check_targets",
]

LOSSES = ("vertex", "surface", "tracks", "auto")
# the losses to choose from for mesh targets (footage targets always use "tracks")
MESH_LOSSES = ("vertex", "surface", "auto")
_LOSS_HINTS = {
    "vertex": "vertex (same topology)",
    "surface": "surface",
    "tracks": "tracks (footage)",
    "auto": "auto",
}


def check_parameters(
    model_name: str, free_parameters: Sequence[str], ties: Mapping[str, str], has_maps: bool = False
) -> None:
    """At least one free parameter (or a map to fit), and every free, tied (follower) and
    leading parameter one of the model's (the model's list in the message)."""
    if not free_parameters and not has_maps:
        raise ValueError("no parameters to fit: choose at least one")
    names = [p.name for p in get_model(model_name).parameters]
    asked = [*free_parameters, *ties, *ties.values()]
    unknown = [p for p in dict.fromkeys(asked) if p not in names]
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; choose from {', '.join(names)}")


def check_targets(
    has_footage: bool,
    has_mesh_targets: bool,
    subject: str | None = None,
    how_to_add: str = "add at least one target frame",
) -> None:
    """Footage targets or mesh targets, one kind and not none. ``subject`` (e.g. the object's
    quoted name) opens the message; ``how_to_add`` ends the one about missing targets."""
    if has_footage and has_mesh_targets:
        mixed = "footage targets and mesh targets cannot be mixed in one fit: choose one kind"
        raise ValueError(f"{subject}: {mixed}" if subject else mixed)
    if not has_footage and not has_mesh_targets:
        missing = f"{subject} has no targets" if subject else "no targets"
        raise ValueError(f"{missing}: {how_to_add}")


def check_loss_name(loss: str, choices: Sequence[str] = LOSSES) -> None:
    """``loss`` is one of ``choices`` (names from :data:`LOSSES`)."""
    if loss not in choices:
        named = [_LOSS_HINTS[c] for c in choices]
        raise ValueError(f"unknown loss '{loss}': use {', '.join(named[:-1])} or {named[-1]}")


def auto_loss(
    loss: str,
    target_vertex_counts: Sequence[int],
    vertex_count: int,
    has_footage: bool = False,
    surface_targets: bool = False,
) -> str:
    """The loss a fit uses: "tracks" with footage targets, else ``loss`` unless it is "auto";
    "auto" is "vertex" when every target has the mesh's ``vertex_count`` and none is given as
    a surface (``surface_targets``: some target comes with its triangles), else "surface"."""
    if has_footage:
        return "tracks"
    if loss != "auto":
        return loss
    same = not surface_targets and all(n == vertex_count for n in target_vertex_counts)
    return "vertex" if same else "surface"
