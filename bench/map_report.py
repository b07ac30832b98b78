"""The weight-map benchmark's summary, table and notes (``bench/maps.py``; no bpy, no Warp).

Each acceptance item is one summary line saying what was wanted and whether it was met.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import Counter
from typing import Any

from map_gradients import FINE_AGREE, FINE_STEPS, KINDS, POINTS, STEP, fine_errors, judge
from map_scenes import REGION_TOLERANCE, SUCCESS_RMSE_M, SceneRecord

REPLAY_SHARE = 0.9  # of the region scenes, replayed within 1 mm
SIGN_SHARE, WITHIN_2X_SHARE = 0.95, 0.8  # of the stable gradient's directions
PIN_LABELS = {"one_row": "edge row", "two_corners": "2 corners", "animated_object": "moving edge row"}
HEADERS = [
    "scene",
    "map",
    "sheet",
    "truth",
    "fitted",
    "determined",
    "outcome",
    "fit mm (at truth)",
    "fit s",
    "replay mm",
    "uniform",
    "uniform replay mm",
]


def share(count: int, total: int) -> str:
    return f"{count} of {total} ({100.0 * count / total:.0f} %)" if total else "none"


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def mm(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{1e3 * value:.{digits}f}"


def spread(values: list[float], scale: float = 1.0, fmt: str = ".3g") -> str:
    """median and largest of ``values`` (times ``scale``)."""
    if not values:
        return "-"
    return f"{statistics.median(values) * scale:{fmt}}, {max(values) * scale:{fmt}}"


def gradient_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind the shares of :func:`map_gradients.judge`, and the exact tape's relative error
    against the fine differences; ``error`` where the check could not run."""
    failed = [r["error"] for r in rows if "error" in r]
    if failed:
        return {"error": failed[0]}
    stats: dict[str, Any] = {kind: judge(rows, kind) for kind in KINDS}
    stats["fine"] = {verdict: len(errors) for verdict, errors in fine_errors(rows).items()}
    return stats


def outcomes(scenes: list[SceneRecord]) -> str:
    """How many fits ended with each outcome (a fit whose write-back failed too)."""
    counted = Counter(r.outcome for r in scenes if r.outcome).most_common()
    return ", ".join(f"{n} {k}" for k, n in counted) or "-"


def drawn_line(scenes: list[SceneRecord]) -> str:
    """How many scenes count, of which kinds, how many failed, and which were drawn again."""
    counted = [r for r in scenes if r.counted]
    kinds = Counter(r.kind for r in counted)
    text = f"{len(counted)} ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}); "
    text += f"{sum(1 for r in counted if r.error)} failed"
    again = [r.name for r in scenes if not r.counted]
    if again:
        text += (
            f"; {len(again)} more drawn and not counted, as the best uniform value replays within 1 mm "
            f"there too (the map's match is no evidence): {', '.join(again)}"
        )
    return text


def uniform_spread(ok: list[SceneRecord]) -> str:
    values = [r.uniform_replay_rmse_m for r in ok if r.uniform_replay_rmse_m is not None]
    return f"{statistics.median(values) * 1e3:.3g}, {min(values) * 1e3:.3g}" if values else "-"


def region_lines(records: list[SceneRecord]) -> dict[str, str]:
    """The region items: replay and uniform over the counted scenes, the values' accuracy and
    the outcome's honesty over every scene drawn."""
    drawn = [r for r in records if r.mode == "regions"]
    if not drawn:
        return {}
    scenes = [r for r in drawn if r.counted]
    ok = [r for r in scenes if not r.error]
    matched = [r for r in ok if r.replay_rmse_m <= SUCCESS_RMSE_M]
    also = [r.name for r in matched if r.uniform_replay_rmse_m <= SUCCESS_RMSE_M]
    values = [
        (abs(r.fitted[name] / r.truth[name] - 1.0), r.name, name)
        for r in drawn
        for name in r.truth
        if r.determined.get(name)
    ]
    off = [v for v in values if v[0] > REGION_TOLERANCE]
    # a fit that ends misfit or stalled offers no values as a match: its values are counted
    # above (every scene drawn) and here only where the fit is called converged
    converged = {r.name for r in drawn if r.outcome == "converged"}
    claimed = [v for v in values if v[1] in converged]
    claimed_off = [v for v in claimed if v[0] > REGION_TOLERANCE]
    replayed = [r for r in drawn if r.replay_rmse_m is not None]
    wrong = [r.name for r in replayed if r.outcome == "converged" and r.replay_rmse_m > SUCCESS_RMSE_M]
    worst = max(values, default=None)
    lines = {
        "regions: scenes": drawn_line(drawn),
        "regions: replay within 1 mm (wanted >= 90 %)": f"{share(len(matched), len(scenes))}: "
        f"{met(len(matched) >= REPLAY_SHARE * len(scenes))}",
        "regions: best uniform value replays over 1 mm where the map replays within 1 mm (wanted all)": (
            f"{share(len(matched) - len(also), len(matched))}: {met(not also)}"
        ),
        "regions: determined region values within 5 %, every scene drawn (wanted all)": (
            f"{share(len(values) - len(off), len(values))}: {met(not off)}"
            + (f"; largest error {100 * worst[0]:.2f} % ({worst[1]} {worst[2]})" if worst else "")
        ),
        "regions: determined region values within 5 %, fits called converged (wanted all)": (
            f"{share(len(claimed) - len(claimed_off), len(claimed))}: {met(not claimed_off)}"
        ),
        "regions: undetermined region values": str(
            sum(1 for r in drawn for name in r.truth if r.outcome and not r.determined.get(name))
        ),
        "regions: converged with a replay over 1 mm, every scene drawn (wanted 0)": f"{len(wrong)}: "
        f"{met(not wrong)}" + (f" ({', '.join(wrong)})" if wrong else ""),
        "regions: replay RMSE mm, map (median, largest)": spread([r.replay_rmse_m for r in ok], 1e3),
        "regions: replay RMSE mm, best uniform value (median, smallest)": uniform_spread(ok),
        "regions: fit outcomes": outcomes(scenes),
        "regions: fit seconds (median, largest)": spread([r.fit_s for r in ok], fmt=".1f"),
    }
    if off:
        lines["regions: determined values off by over 5 %"] = "; ".join(
            f"{name} {region} {100 * e:.1f} %" for e, name, region in sorted(off, reverse=True)
        )
    return lines


def free_lines(records: list[SceneRecord]) -> dict[str, str]:
    drawn = [r for r in records if r.mode == "free"]
    if not drawn:
        return {}
    scenes = [r for r in drawn if r.counted]
    ok = [r for r in scenes if not r.error]
    matched = [r for r in ok if r.replay_rmse_m <= SUCCESS_RMSE_M]
    determined = [r.correlation_determined for r in ok if r.correlation_determined is not None]
    every = [r.correlation_all for r in ok if r.correlation_all is not None]
    smoothness = sorted({f"{r.smoothness:g}" for r in drawn if r.smoothness is not None})
    return {
        "free: scenes": drawn_line(drawn),
        "free: smoothness": ", ".join(smoothness),
        "free: replay within 1 mm (wanted all)": f"{share(len(matched), len(scenes))}: "
        f"{met(len(matched) == len(scenes))}",
        "free: replay RMSE mm, map (median, largest)": spread([r.replay_rmse_m for r in ok], 1e3),
        "free: correlation with the hidden stiffness, determined vertices (smallest, median)": (
            f"{min(determined):.3f}, {statistics.median(determined):.3f}" if determined else "-"
        ),
        "free: correlation with the hidden stiffness, all vertices (smallest, median)": (
            f"{min(every):.3f}, {statistics.median(every):.3f}" if every else "-"
        ),
        "free: undetermined vertices": f"{sum(r.undetermined for r in ok)} of {sum(r.vertices for r in ok)}",
        "free: replay RMSE mm, best uniform value (median, smallest)": uniform_spread(ok),
        "free: fit outcomes": outcomes(scenes),
        "free: fit seconds (median, largest)": spread([r.fit_s for r in ok], fmt=".1f"),
    }


def gradient_lines(gradients: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    if not gradients:
        return {}
    good = {name: rows for name, rows in gradients.items() if not any("error" in r for r in rows)}
    rows = [r for scene in good.values() for r in scene]
    lines = {"gradient: scenes": f"{len(gradients)}; {len(gradients) - len(good)} did not run"}
    if not rows:
        return lines
    for kind in KINDS:
        s = judge(rows, kind)
        ok = s["sign"] >= SIGN_SHARE and s["within_2x"] >= WITHIN_2X_SHARE
        wanted = " (wanted >= 95 % / >= 80 %)" if kind == "stable" else ""
        lines[f"gradient {kind}: sign / within 2x of the slope{wanted}"] = (
            f"{100 * s['sign']:.1f} % / {100 * s['within_2x']:.1f} % of {s['directions']} directions"
            + (f": {met(ok)}" if kind == "stable" else "")
            + f"; where the slope is determined ({s['determined']}): {100 * s['sign_determined']:.1f} % / "
            f"{100 * s['within_2x_determined']:.1f} %; non-finite {s['non_finite']}"
        )
    parts = {f"gradient {name}": scene for name, scene in good.items()}
    parts.update({f"gradient at the {p} point": [r for r in rows if r["point"] == p] for p in POINTS})
    for label, part in parts.items():
        judged = {kind: judge(part, kind) for kind in KINDS if part}
        per = [f"{k} {100 * s['sign']:.0f} % / {100 * s['within_2x']:.0f} %" for k, s in judged.items()]
        lines[f"{label}: sign / within 2x"] = ", ".join(per)
    found = fine_errors(rows)
    agree = found["agrees"]
    steps = f"{FINE_STEPS[0]:g} to {FINE_STEPS[-1]:g}"
    lines[f"gradient exact tape against central differences over +-{steps} (frozen counts)"] = (
        f"{share(len(agree), sum(map(len, found.values())))} directions agree within {FINE_AGREE:g} "
        + (f"(median {statistics.median(agree):.1e}, largest {max(agree):.1e})" if agree else "")
        + f"; {len(found['unresolved'])} unresolved (no two neighbouring steps agree: chaotic); "
        f"{len(found['off'])} off (the differences settle, the tape does not match)"
    )
    return lines


def summarize(
    records: list[SceneRecord], gradients: dict[str, list[dict]], args: argparse.Namespace, seconds: float
) -> dict[str, str]:
    summary = {"seed": str(args.seed), "run seconds": f"{seconds:.0f}"}
    summary.update(region_lines(records))
    summary.update(free_lines(records))
    summary.update(gradient_lines(gradients))
    failed = [f"{r.name}: {r.error}" for r in records if r.error]
    if failed:
        summary["scenes that failed"] = "; ".join(failed)
    return summary


def values_text(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in values.items())


def row(r: SceneRecord) -> list[str]:
    spec = r.spec
    soft = " soft" if r.mode == "regions" and spec["width"] > 0 else ""
    sheet = (
        f"{spec['grid']}x{spec['grid']} {spec['size_m']} m, {spec['mass_kg']} kg, "
        f"{PIN_LABELS[spec['pins']]}, frames {','.join(map(str, spec['target_frames']))}"
    )
    name = r.name if r.counted else f"{r.name} (not counted: the uniform value matches too)"
    head = [name, f"{r.kind} {spec['layout']}{soft}", sheet]
    if not r.outcome:  # no fit to show
        return head + [values_text(r.truth), r.error] + ["-"] * (len(HEADERS) - 5)
    if r.mode == "regions":
        fitted = values_text(r.fitted)
        undetermined = [n for n in r.truth if not r.determined.get(n)]
        determined = "all" if not undetermined else "not " + ", ".join(undetermined)
    else:
        determined_c, all_c = (
            math.nan if c is None else c for c in (r.correlation_determined, r.correlation_all)
        )
        fitted = (
            f"{r.fitted['low']:.4g}-{r.fitted['high']:.4g}, correlation {determined_c:.3f} (all {all_c:.3f})"
        )
        determined = f"{r.vertices - r.undetermined} of {r.vertices}"
    return head + [
        values_text(r.truth) if r.mode == "regions" else f"{r.truth['low']:.4g}-{r.truth['high']:.4g}",
        fitted,
        determined,
        r.outcome,
        f"{mm(r.fit_rmse_m, 4)} ({mm(r.truth_model_rmse_m, 4)})",
        f"{r.fit_s:.1f}",
        mm(r.replay_rmse_m, 4) if not r.error else f"not replayed: {r.error}",
        "-" if r.uniform_value is None else f"{r.uniform_value:.4g}",
        mm(r.uniform_replay_rmse_m),
    ]


def table(records: list[SceneRecord]) -> tuple[list[str], list[list[str]]]:
    return HEADERS, [row(r) for r in records]


def notes(args: argparse.Namespace) -> list[str]:
    return [
        "Scenes made by Blender's own cloth with a hidden stiffness map, reset to Blender's defaults "
        "(tension = compression = 15, Max 15, bending 0.5, no group); vertex mass 0.5-1.2 kg under a "
        "structural map, Blender's 0.3 kg under a bending one; every fit on the CPU in float64. "
        "Regions: the Weight Map settings ask for the painted regions and nothing else (no damping or "
        "other parameter), the engine's defaults (at most 30 steps). Free: the default smoothness, at "
        f"most {args.free_iterations} steps. Uniform: the kind's base value alone (compression tied).",
        "replay: Blender's cloth after the add-on's write-back (values into the modifier, the map into a "
        "vertex group), RMSE over all vertices and target frames; *fit mm (at truth)*: the fit's own "
        "model at the fitted values (at the hidden map). Free *fitted*: the fitted stiffness range and "
        "its correlation with the hidden one over the vertices the fit reports determined (all).",
        "Gradient: the free map's unknowns (log stiffness per vertex) at the uniform start, a rough "
        "random map (every vertex 2-60 on its own) and a smooth random one (3-8x), "
        f"{args.directions} random sign directions each"
        + (", smoothed as the fit's steps are (map_gradients)" if args.direction_kind == "smooth" else "")
        + "; the slope is the central "
        f"difference of the whole rollout's loss over +-{STEP:g} in log stiffness with the base point's "
        "solver iteration counts (bench/gradients.py's step), determined where a start 1e-12 away and "
        "the difference over half the step both give the same slope within 2x.",
    ]
