"""A fit's weight maps into the object's vertex groups and back (main thread).

The record's ``maps`` entry holds, per kind, the fitted weights (``vertex_weights``), the
range they span (``settings``: each base value and its Max) and the group asked for
(``group``; "" for the one the model's field names, or a new one: ``SceneModel.map_targets``).
:func:`write_maps` writes them with ``map_groups.write_map`` and keeps what it replaced on
the object (an ID property, saved with the .blend); :func:`restore_maps` puts that back
(Revert).
"""

from __future__ import annotations

import json
from typing import Any

import bpy
import numpy as np

from ..errors import FitInputError
from ..models.registry import object_model
from .map_groups import GroupState, restore_map, write_map

# the object's ID property holding the replaced groups' states, newest last
STATES_KEY = "fit_to_target_map_states"


def is_region_parameter(name: str) -> bool:
    """A map region's value (``structural:collar``): a record's parameter no modifier field holds."""
    return ":" in name


def map_maxima(ob: bpy.types.Object, maps: dict[str, dict[str, Any]]) -> set[str]:
    """The Max fields the record's maps set on the object (written with their weights)."""
    targets = object_model(ob).map_targets
    return {name for kind in maps if kind in targets for name in targets[kind].max_fields}


def write_maps(ob: bpy.types.Object, maps: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Write each map of a record into its group (its Max values with it); kind -> the group
    written. What Revert restores is what the groups held just before (as for the modifier's
    values). On failure, what was written is undone and FitInputError says why."""
    states: list[GroupState] = []
    targets = object_model(ob).map_targets
    try:
        for kind, entry in maps.items():
            weights = np.asarray(entry["vertex_weights"], dtype=np.float64)
            fields = targets[kind].max_fields if kind in targets else ()
            maxima = {name: float(entry["settings"][name]) for name in fields}
            states.append(write_map(ob, kind, weights, maxima, group_name=entry.get("group", "")))
    except Exception:
        for state in reversed(states):
            restore_map(ob, state)
        raise
    if states:
        ob[STATES_KEY] = json.dumps([state.to_json() for state in states])
    return {state.kind: state.group for state in states}


def restore_maps(ob: bpy.types.Object) -> None:
    """Undo the last :func:`write_maps` (nothing where none is kept)."""
    try:
        states = [GroupState.from_json(text) for text in json.loads(ob.get(STATES_KEY, "[]"))]
    except ValueError as error:
        raise FitInputError(f"'{ob.name}': the stored vertex-group states are damaged ({error})") from error
    for state in reversed(states):
        restore_map(ob, state)
    if STATES_KEY in ob:
        del ob[STATES_KEY]
