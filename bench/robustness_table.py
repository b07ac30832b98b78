"""The robustness benchmark's table and summary, as text and as Markdown (no bpy, no Warp)."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

from robustness_scenes import (
    JITTER,
    SHORT,
    SUCCESS_RMSE_M,
    TRUTH_RMSE_M,
    FitRecord,
    GeneratedScene,
    ReplayRecord,
    truth_outside,
)

PIN_LABELS = {
    "one_row": "row",
    "two_rows": "2 rows",
    "two_corners": "2 corners",
    "animated_object": "moving object",
    "hooked_empty": "hooked empty",
}

LEGEND = (
    "T tension = compression stiffness, B bending stiffness, A air damping, D tension damping; "
    "the fit starts from Blender's defaults (15, 0.5, 1, 5). RMSE over all vertices and target "
    "frames: *start* and *fit* by the fit's own model at the start and fitted values, *replay* by "
    "Blender's cloth with the fitted values. With the truth check: Blender (*truth replay*) and the "
    "fit's model (*truth model*) at the true values, and Blender at the true values times "
    f"(1 + {JITTER:g}) (*jitter*: how chaotic the scene is)."
)


@dataclass
class Row:
    scene: GeneratedScene
    fit: FitRecord | None
    replay: ReplayRecord | None

    @property
    def fit_ok(self) -> bool:
        return self.fit is not None and not self.fit.error

    @property
    def success(self) -> bool:
        r = self.replay
        return self.fit_ok and r is not None and r.rmse_m is not None and r.rmse_m <= SUCCESS_RMSE_M

    @property
    def claims_success(self) -> bool:
        """Does the fit say it worked? Its ``outcome`` where it reports one, else "it returned
        a result without an error" (what the batch command reports as success today)."""
        if not self.fit_ok:
            return False
        if self.fit.outcome is not None:
            return self.fit.outcome == "converged"
        return True

    @property
    def replayed(self) -> bool:
        return self.replay is not None and self.replay.rmse_m is not None

    @property
    def truth_outside(self) -> list[str]:
        """The determined parameters of a converged fit whose reported matched range leaves
        the true value out (``robustness_scenes.truth_outside``)."""
        if not self.claims_success:
            return []
        return truth_outside(self.scene.spec.truth, self.fit.params, self.fit.matched_ranges)


def mm(metres: float | None) -> str:
    if metres is None:
        return "-"
    value = metres * 1e3
    return f"{value:.2g}" if value < 0.01 else f"{value:.3g}"


def values_text(values: dict[str, float], names: list[str]) -> str:
    return " ".join(f"{SHORT[n]} {values[n]:.3g}" for n in names if n in values)


def outcome_text(row: Row) -> str:
    if row.scene.error:
        return "not generated"
    if row.fit is None:
        return "not fitted"
    if row.fit.error:
        return "error"
    return row.fit.outcome or row.fit.stop_reason


def cells(row: Row, check_truth: bool) -> list[str]:
    spec, fit, replay = row.scene.spec, row.fit, row.replay
    fitted = values_text(fit.params, spec.fitted) if row.fit_ok else "-"
    fit_s = f"{fit.fit_s:.1f}" if row.fit_ok and fit.fit_s is not None else "-"
    rmse = mm(replay.rmse_m) if replay is not None else "-"
    out = [
        str(spec.index),
        f"{spec.grid}x{spec.grid} {'tri' if spec.triangles else 'quad'}",
        PIN_LABELS.get(spec.pins, spec.pins),
        str(spec.quality),
        ",".join(map(str, spec.target_frames)),
        values_text(spec.truth, spec.fitted),
        fitted,
        fit_s,
        outcome_text(row),
        mm(fit.start_rmse_m) if row.fit_ok else "-",
        mm(fit.rmse_m) if row.fit_ok else "-",
        rmse,
        "yes" if row.success else "NO",
    ]
    if check_truth:
        checks = (replay.truth_rmse_m, replay.truth_model_rmse_m, replay.jitter_rmse_m) if replay else ()
        out += [mm(v) for v in checks] or ["-"] * 3
    return out


def headers(check_truth: bool) -> list[str]:
    names = ["#", "mesh", "pins", "Q", "frames", "truth", "fitted", "fit s", "outcome", "start mm", "fit mm"]
    names += ["replay mm", "ok"]
    return names + (["truth replay mm", "truth model mm", "jitter mm"] if check_truth else [])


def summary_lines(rows: list[Row], check_truth: bool) -> list[str]:
    n = len(rows)
    successes = sum(r.success for r in rows)
    times = [r.fit.fit_s for r in rows if r.fit_ok and r.fit.fit_s is not None]
    errors = sum(r.fit is not None and bool(r.fit.error) for r in rows)
    unfitted = sum(r.fit is None for r in rows)
    wrong = [r.scene.spec.index for r in rows if r.claims_success and r.replayed and not r.success]
    with_outcome = any(r.fit_ok and r.fit.outcome is not None for r in rows)
    claim = "outcome 'converged'" if with_outcome else "fit returned without an error (no outcome field yet)"
    lines = [
        f"success (replay RMSE <= {SUCCESS_RMSE_M * 1e3:g} mm): {successes}/{n}"
        + (f" ({100.0 * successes / n:.0f} %)" if n else ""),
        f"fit errors: {errors}" + (f"; not fitted yet: {unfitted}" if unfitted else ""),
        "outcomes: " + ", ".join(f"{k} {v}" for k, v in Counter(map(outcome_text, rows)).most_common()),
    ]
    if times:
        lines.append(
            f"fit time: median {statistics.median(times):.1f} s, mean {statistics.mean(times):.1f} s, "
            f"max {max(times):.1f} s ({len(times)} fits)"
        )
    lines.append(
        f"claimed success but replay > {SUCCESS_RMSE_M * 1e3:g} mm ({claim}): {len(wrong)}"
        + (f" (scenes {', '.join(map(str, wrong))})" if wrong else "")
    )
    outside = [(r.scene.spec.index, names) for r in rows if (names := r.truth_outside)]
    lines.append(
        f"converged with the truth outside a reported matched range: {len(outside)}"
        + (f" ({'; '.join(f'scene {i}: ' + ', '.join(names) for i, names in outside)})" if outside else "")
    )
    if not with_outcome:
        # the stop reasons that already say "converged" are the strongest claim the fit makes today
        said = [i for i in wrong if rows_by_index(rows)[i].fit.stop_reason.startswith("converged")]
        lines.append(f"  of these, stop reason converged_*: {len(said)} ({', '.join(map(str, said)) or '-'})")
    if check_truth:
        lines += truth_lines(rows)
    return lines + [phase_line(rows)] + error_lines(rows)


def phase_line(rows: list[Row]) -> str:
    """Time spent per phase, summed over the scenes (several partial runs add up)."""
    generate = sum(r.scene.seconds for r in rows)
    fit = sum(r.fit.wall_s for r in rows if r.fit is not None)
    replay = sum(r.replay.seconds for r in rows if r.replay is not None)
    return (
        f"phase times: generate {generate:.0f} s, fit {fit:.0f} s (processes, start-up included), "
        f"replay {replay:.0f} s"
    )


def error_lines(rows: list[Row]) -> list[str]:
    """Each distinct error once, with the scenes it hit."""
    scenes: dict[str, list[int]] = {}
    for r in rows:
        for error in (r.scene.error, r.fit.error if r.fit else "", r.replay.error if r.replay else ""):
            if error:
                scenes.setdefault(error, []).append(r.scene.spec.index)
    return [f"error in scenes {', '.join(map(str, k))}: {e}" for e, k in scenes.items()]


def rows_by_index(rows: list[Row]) -> dict[int, Row]:
    return {r.scene.spec.index: r for r in rows}


def truth_lines(rows: list[Row]) -> list[str]:
    """The pipeline's sanity check: the true values must reproduce the targets."""
    checked = [r.replay for r in rows if r.replay is not None and r.replay.truth_rmse_m is not None]
    if not checked:
        return ["truth check: not run"]
    worst_blender = max(r.truth_rmse_m for r in checked)
    model = [r for r in checked if r.truth_model_rmse_m is not None]
    bad = [r.index for r in checked if r.truth_rmse_m > TRUTH_RMSE_M]
    lines = [
        f"truth replay in Blender: largest RMSE {mm(worst_blender)} mm; over {TRUTH_RMSE_M * 1e3:g} mm: "
        + (", ".join(map(str, bad)) if bad else "none")
    ]
    if model:
        bad_model = [r for r in model if r.truth_model_rmse_m > TRUTH_RMSE_M]
        motion = {r.scene.spec.index: r.scene.motion_m for r in rows}
        ratio = max(r.truth_model_rmse_m / motion[r.index] for r in model)
        listed = ", ".join(f"{r.index} (jitter {mm(r.jitter_rmse_m)} mm)" for r in bad_model)
        lines.append(
            f"fit model at the truth: largest RMSE {mm(max(r.truth_model_rmse_m for r in model))} mm, "
            f"largest RMSE / motion {ratio:.1e}; over {TRUTH_RMSE_M * 1e3:g} mm: {listed or 'none'}"
        )
    return lines


def text_table(rows: list[Row], check_truth: bool) -> str:
    table = [headers(check_truth)] + [cells(r, check_truth) for r in rows]
    widths = [max(len(line[k]) for line in table) for k in range(len(table[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + [""] + summary_lines(rows, check_truth))


def markdown_table(rows: list[Row], check_truth: bool) -> str:
    head = headers(check_truth)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cells(r, check_truth)) + " |" for r in rows]
    summary = [f"- {line}" for line in summary_lines(rows, check_truth)]
    return "\n".join(lines + ["", LEGEND, ""] + summary) + "\n"
