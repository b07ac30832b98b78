"""What a fit run writes into the scene when it ends (main thread, the Fit operator's one
undo step), and how it reports each object's result: a converged fit as information, any
other outcome as a warning that says why."""

import bpy

from ...warp_core.fit.verdict.report import format_value, record_misfit
from ..job import FitJob
from ..request import PreparedFit
from ..scene.records import quoted_names, shared_summary
from ..scene.write_back import write_back


def _summary(record: dict) -> str:
    """One line for the info report: values before -> after and the error drop."""
    initial = record.get("initial_params") or {}
    parts = [
        f"{name} {format_value(initial.get(name))} -> {format_value(value)}"
        for name, value in (record.get("params") or {}).items()
        if name not in (record.get("ties") or {})
    ]
    before, after = record_misfit(record, "initial_rmse"), record_misfit(record, "rmse")
    rmse = f"RMSE {before} -> {after}"
    return f"Fitted {record.get('name')}: " + ", ".join(parts) + f"; {rmse}"


def report_result(op: bpy.types.Operator, record: dict, applied: bool = True) -> None:
    """A converged fit is reported as information; any other outcome as a warning that says
    why, so a fit that does not match its targets never reads as a success, and whether its
    values were applied."""
    outcome = record.get("outcome")
    if outcome in (None, "converged"):
        op.report({"INFO"}, _summary(record))
        return
    kept = "" if applied else "; the values were not applied: Apply Fitted Values uses them"
    op.report(
        {"WARNING"}, f"{_summary(record)}; NOT MATCHED ({outcome}): {record.get('outcome_reason')}{kept}"
    )


def write_results(
    op: bpy.types.Operator,
    prepared: list[PreparedFit],
    job: FitJob,
    shared: bool,
    read_as: dict[str, dict[str, str]] | None = None,
) -> set[str]:
    """All scene writes of a run, on the main thread, in the operator's one undo step. A
    cancelled run writes nothing at all; otherwise each object whose fit produced values
    gets them, and each failure is reported by name. ``read_as``: each object's fit inputs
    as the export read them (:func:`fingerprints`), kept so that a change made while the fit
    ran marks its result out of date."""
    names = [p.request.object_name for p in prepared]
    if job.cancel_requested or any(getattr(r, "cancelled", False) for r in job.results):
        op.report({"WARNING"}, f"Fit of {quoted_names(names)} cancelled: nothing was changed")
        return {"CANCELLED"}
    written = 0
    if shared:
        outcome = job.results[0]
        if outcome is None:
            op.report({"ERROR"}, f"Shared fit of {quoted_names(names)} failed: {job.errors[0]}")
            return {"CANCELLED"}
        extra = {"run_objects": names, "shared": outcome.summary(names)}
        pairs = list(zip(prepared, outcome.members, strict=True))
        op.report(_level(outcome.joint.outcome), shared_summary(outcome.summary(names)))
    else:
        extra = {"run_objects": names}
        pairs = []
        for p, result, error in zip(prepared, job.results, job.errors, strict=True):
            if result is None:
                op.report({"ERROR"}, f"Fit of '{p.request.object_name}' failed: {error}")
            else:
                pairs.append((p, result))
    for p, result in pairs:
        ob = bpy.data.objects.get(p.request.object_name)
        if ob is None:
            op.report(
                {"ERROR"}, f"'{p.request.object_name}' no longer exists: its fit result was not written"
            )
            continue
        # a fit that does not match its targets is kept, not applied: the artist decides (Apply)
        matched = (job.results[0].joint if shared else result).outcome == "converged"
        fingerprint = (read_as or {}).get(ob.name)
        record = write_back(ob, p, result, extra, apply=matched, fingerprint=fingerprint)
        report_result(op, record, applied=matched)
        written += 1
    return {"FINISHED"} if written else {"CANCELLED"}


def _level(outcome: str | None) -> set[str]:
    return {"INFO"} if outcome in (None, "converged") else {"WARNING"}
