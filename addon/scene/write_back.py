"""A finished fit into the scene (main thread): the result on the object, the fitted values
into its modifier, and back again (Revert)."""

from __future__ import annotations

import json
from typing import Any

import bpy

from ...warp_core.fit import FitResult
from ...warp_core.fit.verdict.report import json_safe
from ...warp_core.targets.units import unit_of
from ..errors import FitInputError
from ..models.registry import object_model, parameter_names
from ..request import PreparedFit
from .bake import is_baked, unbake_object
from .checks import check_object
from .footage import store_bindings
from .loss_curve import rmse_history, update_curve_image
from .map_writes import is_region_parameter, map_maxima, restore_maps, write_maps
from .records import result_record
from .staleness import FINGERPRINT_KEY, fit_fingerprint


def write_back(
    ob: bpy.types.Object,
    prepared: PreparedFit,
    result: FitResult,
    extra: dict[str, Any] | None = None,
    apply: bool = True,
    fingerprint: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Store the result on the object and apply the fitted values to its modifier.

    ``extra`` joins the record: the objects fitted in the same run (``run_objects``) and,
    for a shared material, the shared fit's summary (``shared``).

    The object's copy of the record (``result_json``) also keeps what only the panel reads:
    the RMSE after each iteration (``rmse_history_m``, or ``_px``: the loss curve, also drawn
    into the object's loss-curve image) and the fingerprint of the fit's inputs
    (``fingerprint``: ``fingerprint`` when given, best taken as the fit started, else the
    scene's now; see :mod:`.staleness`). The returned record, which reports list, has neither.

    Main thread, after a successful fit. ``apply=False`` stores the result without writing
    its values (the panel keeps a fit that did not match until the artist applies it).
    """
    record = result_record(prepared, result)
    record.update(json_safe(extra or {}))
    if prepared.request.footage is not None:
        store_bindings(ob.fit_to_target, prepared.request.footage, result.track_errors, result.track_bindings)
    unit = unit_of(record.get("unit"))
    history = rmse_history(record)
    kept = {
        **record,
        f"rmse_history_{unit.symbol}": history,
        FINGERPRINT_KEY: fingerprint if fingerprint is not None else fit_fingerprint(ob, prepared.request),
    }
    stored = store_record(ob, json_safe(kept), apply)
    for kind, entry in (record.get("maps") or {}).items():  # where the weights went
        entry["group"] = stored["maps"][kind]["group"]
    update_curve_image(ob, history, record.get(f"tolerance_{unit.symbol}"))
    return record


def store_record(ob: bpy.types.Object, record: dict[str, Any], apply: bool = True) -> dict[str, Any]:
    """A fit's record onto its object (the panel shows it, Revert undoes it) and, with
    ``apply``, its values into the modifier: after a fit, or from another run's report (the
    batch command's ``--apply``). Returns the record as stored (with ``apply``, each map's
    ``group`` the one written)."""
    ob.fit_to_target.result_json = json.dumps(record)
    # Revert goes back to what the modifier holds now, even if an earlier fit was applied
    ob.fit_to_target.applied = False
    return apply_result(ob) if apply else record


def fitted_values(record: dict[str, Any]) -> dict[str, Any]:
    """Values a result writes into the modifier: start values (presets), fitted values, and
    the base and Max values of each fitted map (not its regions' values, which its weights
    hold)."""
    values = dict(record.get("start_values") or {})
    values.update({k: v for k, v in (record.get("params") or {}).items() if not is_region_parameter(k)})
    for entry in (record.get("maps") or {}).values():
        values.update(entry["settings"])
    return values


def apply_result(ob: bpy.types.Object) -> dict[str, Any]:
    """Write the last result's values into the modifier (and its maps into their vertex
    groups), keeping the current ones for Revert; the result's record, each map's ``group``
    the one written."""
    mod = check_object(ob)
    model = object_model(ob)
    s = ob.fit_to_target
    if not s.result_json:
        raise FitInputError(f"'{ob.name}' has no fit result to apply")
    record = json.loads(s.result_json)
    values = fitted_values(record)
    if s.applied:
        return record
    if is_baked(ob):  # a bake of the previous values would no longer show what the modifier does
        unbake_object(ob)
    names = list(dict.fromkeys(list(parameter_names(model.name)) + list(values)))
    previous = model.current_values(mod, names)
    maps = record.get("maps") or {}
    # a map's Max goes in with its weights, after the base it may not be below
    model.write_values(mod, {k: v for k, v in values.items() if k not in map_maxima(ob, maps)})
    try:
        groups = write_maps(ob, maps)
    except Exception:
        model.write_values(mod, previous)
        raise
    if groups:  # the record says where the weights went
        for kind, group in groups.items():
            record["maps"][kind]["group"] = group
        s.result_json = json.dumps(record)
    s.previous_values_json = json.dumps(previous)
    s.applied = True
    return record


def revert(ob: bpy.types.Object, remove_bake: bool = True) -> dict[str, Any]:
    """Put back the modifier values from before the fitted ones were applied; with
    ``remove_bake`` also remove the object's bake (its Mesh Cache modifier; the .pc2 file
    stays), which showed the fitted values. Without it the bake stays and keeps playing."""
    mod = check_object(ob)
    s = ob.fit_to_target
    if not s.previous_values_json:
        raise FitInputError(f"'{ob.name}' has no previous values to revert to")
    previous = json.loads(s.previous_values_json)
    if remove_bake and is_baked(ob):
        unbake_object(ob)
    restore_maps(ob)
    object_model(ob).write_values(mod, previous)
    s.applied = False
    return previous
