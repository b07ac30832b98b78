"""The fit engine is generic over a model: a toy model defined and registered here, with no
change to ``warp_core.fit``, is fitted like the cloth.

The toy is a "ballistic sheet": every vertex falls from its rest position under gravity
``gravity_scale * g0`` with linear air drag ``drag``, so at time ``t`` after the start

    x(t) = x0 + (g / c) * (t - (1 - exp(-c t)) / c),   g = gravity_scale * g0, c = drag

in closed form. It is written as a Warp kernel reading the ``params`` array, so the tape
gradient (Adam) flows through it as it does through the cloth solver.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import warp as wp

from warp_core.fit import FitError, FitObjective, FitProblem, FitSettings, Target, fit
from warp_core.fit.problem.files import load_problem, save_problem
from warp_core.fit.problem.spec import parameter_spec
from warp_core.fit.verdict.report import format_table
from warp_core.mesh import ClothMesh, grid_mesh
from warp_core.models import Model, Parameter, Simulator, get_model, register_model, unregister_model

FIT_PACKAGE = Path(__file__).resolve().parents[2] / "warp_core" / "fit"

TOY_NAME = "toy_ballistic"
FPS = 24.0
G0 = (0.0, 0.0, -9.81)
TRUTH = {"drag": 0.8, "gravity_scale": 1.3}
FRAMES = [12, 36, 72]  # up to 3 s: drag * t reaches 2.4, so drag bends the curve visibly


@dataclass
class ToySettings:
    drag: float = 1.0  # 1/s
    gravity_scale: float = 1.0
    fps: float = FPS  # fixed, not fitted

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def values(self) -> dict[str, float]:
        return {"drag": float(self.drag), "gravity_scale": float(self.gravity_scale)}

    def replace(self, **changes: float) -> ToySettings:
        unknown = set(changes) - {"drag", "gravity_scale", "fps"}
        if unknown:
            raise ValueError(f"unknown toy parameter(s): {sorted(unknown)}")
        return ToySettings(**{**asdict(self), **changes})

    def validate(self) -> None:
        # the closed form holds for any drag > 0; the bounds below only box the fit
        if not (math.isfinite(self.drag) and self.drag > 0.0):
            raise ValueError(f"drag must be > 0, got {self.drag}")
        if not (math.isfinite(self.gravity_scale) and self.gravity_scale >= 0.0):
            raise ValueError(f"gravity_scale must be >= 0, got {self.gravity_scale}")


TOY_BOUNDS = {"drag": (1e-3, 100.0), "gravity_scale": (0.0, 10.0)}


@wp.kernel
def ballistic_positions(
    rest: wp.array(dtype=wp.vec3d),
    times: wp.array(dtype=wp.float64),
    params: wp.array(dtype=wp.float64),
    g0: wp.vec3d,
    positions: wp.array2d(dtype=wp.vec3d),
):
    f, i = wp.tid()
    c = params[0]
    scale = params[1]
    t = times[f]
    fall = (t - (wp.float64(1.0) - wp.exp(-c * t)) / c) / c
    positions[f, i] = rest[i] + (scale * fall) * g0


@dataclass
class ToyRollout:
    positions: wp.array  # (frames, N) vec3d

    @property
    def frozen(self) -> None:
        return None  # nothing discrete to repeat

    @property
    def extras(self) -> dict:
        return {}  # nothing more to report

    def numpy(self) -> np.ndarray:
        return self.positions.numpy().astype(np.float64)


class ToySimulator:
    parallel_rollouts = False  # the fit runs its rollouts one after the other
    stream_rollouts = False
    contact_probe = False  # no collision objects

    def __init__(self, mesh: ClothMesh, settings: ToySettings, device: str, start_frame: int) -> None:
        settings.validate()
        self.settings = settings
        self.device = str(wp.get_device(device))
        self.dtype = wp.float64
        self.vec3 = wp.vec3d
        self.start_frame = start_frame
        self.rest = wp.array(mesh.vertices, dtype=wp.vec3d, device=self.device)
        self.params = wp.zeros(2, dtype=wp.float64, device=self.device, requires_grad=True)
        self.set_params(settings.values())

    def set_params(self, values: dict[str, float]) -> None:
        settings = self.settings.replace(**values)
        settings.validate()
        self.settings = settings
        self.params.assign(np.array([settings.drag, settings.gravity_scale]))

    def rollout(
        self,
        frame_end: int,
        output_frames: list[int] | None = None,
        goals: np.ndarray | None = None,
        frozen: Any = None,
    ) -> ToyRollout:
        frames = list(range(self.start_frame, frame_end + 1)) if output_frames is None else output_frames
        times = wp.array(
            [(f - self.start_frame) / self.settings.fps for f in frames], dtype=wp.float64, device=self.device
        )
        n = len(self.rest)
        positions = wp.zeros((len(frames), n), dtype=wp.vec3d, device=self.device, requires_grad=True)
        wp.launch(
            ballistic_positions,
            dim=(len(frames), n),
            inputs=[self.rest, times, self.params, wp.vec3d(*G0)],
            outputs=[positions],
            device=self.device,
        )
        return ToyRollout(positions)

    def max_stretch(self, positions: np.ndarray) -> float:
        return 1.0  # every vertex moves alike: nothing stretches

    def batch_width(self, rollouts: int) -> int:
        return 0  # no batches

    def rollout_batch(self, points, frame_end, output_frames=None, goals=None, frozen=None) -> Any:
        raise NotImplementedError("the toy runs no batches")

    def tape_gradient_refusal(self) -> str | None:
        return None  # the kernel is differentiated by Warp's tape

    def rollout_shifted(self, shift_m, frame_end, output_frames, goals) -> ToyRollout:
        raise NotImplementedError("the toy has no start-gap probe")

    def record_maps(self, *_: Any) -> None:
        raise NotImplementedError("the toy has no weight maps")

    map_gradients = set_maps = record_maps


class ToyModel:
    name = TOY_NAME
    label = "Ballistic sheet (test)"
    differentiable = True
    gradient_kinds = ("stable", "exact")  # both the same exact tape gradient here
    map_kinds = ()  # no per-vertex weight maps
    map_ranges: dict = {}
    parameters = (
        Parameter("drag", "Drag", 1.0, TOY_BOUNDS["drag"]),
        Parameter("gravity_scale", "Gravity scale", 1.0, TOY_BOUNDS["gravity_scale"]),
    )

    def default_settings(self) -> ToySettings:
        return ToySettings()

    def settings_from_dict(self, values: dict[str, Any]) -> ToySettings:
        return ToySettings(**values)

    def build(
        self, geometry: ClothMesh, settings: ToySettings, device: str, precision: str, start_frame: int = 1
    ) -> ToySimulator:
        if precision != "float64":
            raise ValueError(f"the toy model runs in float64 only, not {precision}")
        return ToySimulator(geometry, settings, device, start_frame)


def truth_positions(mesh: ClothMesh, frames: list[int], start_frame: int = 1) -> np.ndarray:
    """The closed form in numpy, independent of the kernel."""
    c, scale = TRUTH["drag"], TRUTH["gravity_scale"]
    t = (np.asarray(frames, float) - start_frame) / FPS
    fall = (t - (1.0 - np.exp(-c * t)) / c) / c
    return mesh.vertices[None] + scale * fall[:, None, None] * np.asarray(G0)


@pytest.fixture
def toy() -> Iterator[ToyModel]:
    model = ToyModel()
    register_model(model)
    try:
        yield model
    finally:
        unregister_model(TOY_NAME)


def toy_problem(**start: float) -> FitProblem:
    mesh = grid_mesh(3, 3, 1.0, 1.0)
    targets = [Target(f, x) for f, x in zip(FRAMES, truth_positions(mesh, FRAMES), strict=True)]
    return FitProblem(
        mesh, ToySettings(**start), targets, free_parameters=["drag", "gravity_scale"], model=TOY_NAME
    )


def test_toy_satisfies_the_protocols(toy: ToyModel) -> None:
    assert isinstance(get_model(TOY_NAME), Model)
    sim = toy.build(grid_mesh(3, 3), ToySettings(**TRUTH), "cpu", "float64")
    assert isinstance(sim, Simulator)
    rollout = sim.rollout(max(FRAMES), FRAMES)
    np.testing.assert_allclose(rollout.numpy(), truth_positions(grid_mesh(3, 3), FRAMES), rtol=0, atol=1e-12)


def test_lm_recovers_toy_parameters(toy: ToyModel) -> None:
    start = {"drag": 0.27, "gravity_scale": 3.9}  # both about 3x off
    seen: list[int] = []
    # no RMSE tolerance: iterate until the noise-free targets are matched to round-off
    result = fit(
        toy_problem(**start),
        FitSettings(optimizer="lm", rmse_tolerance_m=0.0),
        progress=lambda k, loss, values: seen.append(k),
    )
    assert result.optimizer == "lm" and not result.cancelled
    assert result.stop_reason in ("converged_loss", "converged_gradient"), result.stop_reason
    for name, value in TRUTH.items():
        assert result.params[name] == pytest.approx(value, rel=1e-9), name
    assert result.initial_params == start
    assert result.rmse < 1e-9
    assert result.initial_rmse > 1.0  # metres: the start is far off
    assert seen == list(range(result.iterations + 1))
    assert isinstance(result.model_settings, ToySettings)
    assert result.model_settings.values() == result.params
    assert result.model_settings.fps == FPS  # fixed settings carried over
    assert result.device == "cpu"
    assert result.warnings == []
    assert [e["name"] for e in result.identifiability] == ["drag", "gravity_scale"]
    assert all(e["determined"] for e in result.identifiability)
    # the outcome, judged against the size of the motion
    motion = float(
        np.sqrt(
            np.mean(np.sum((truth_positions(grid_mesh(3, 3), FRAMES) - grid_mesh(3, 3).vertices) ** 2, -1))
        )
    )
    assert result.motion == pytest.approx(motion, rel=1e-12)
    assert result.tolerance == pytest.approx(min(1e-3, 1e-3 * motion))
    assert result.outcome == "converged" and result.undetermined == [] and result.at_bounds == {}
    summary = result.summary()
    assert summary["outcome"] == "converged" and summary["tolerance_m"] == result.tolerance
    assert summary["rmse_relative"] == pytest.approx(result.rmse / motion)


def test_toy_tape_gradient_matches_finite_differences(toy: ToyModel) -> None:
    """What Adam consumes: the loss and its gradient through the toy's kernel on the tape."""
    names = ["drag", "gravity_scale"]
    objective = FitObjective(toy_problem(drag=1.0, gravity_scale=1.1), FitSettings(), names)
    values = {"drag": 1.0, "gravity_scale": 1.1}
    loss, grad = objective.gradient(values)
    r = objective.residuals(values)
    assert loss == pytest.approx(0.5 * float(r @ r), rel=1e-12)
    for name in names:
        h = 1e-6 * values[name]
        up = objective.residuals({**values, name: values[name] + h})
        down = objective.residuals({**values, name: values[name] - h})
        fd = (0.5 * float(up @ up) - 0.5 * float(down @ down)) / (2 * h)
        assert grad[name] == pytest.approx(fd, rel=1e-6), name


def test_adam_fits_the_toy(toy: ToyModel) -> None:
    start = {"drag": 1.0, "gravity_scale": 1.1}
    result = fit(toy_problem(**start), FitSettings(optimizer="adam", max_iterations=200, adam_lr=0.02))
    assert result.optimizer == "adam" and result.n_backward > 0
    assert result.final_loss < 1e-3 * result.initial_loss
    for name, value in TRUTH.items():
        # drag and gravity trade off along a narrow valley, where Adam stops short
        assert abs(math.log(result.params[name] / value)) < abs(math.log(start[name] / value)), name
        assert result.params[name] == pytest.approx(value, rel=0.05), name
    assert isinstance(result.model_settings, ToySettings)


def test_toy_validation_names_its_own_parameters(toy: ToyModel) -> None:
    problem = toy_problem(drag=1.0, gravity_scale=1.0)
    problem.free_parameters = ["tension_stiffness"]
    with pytest.raises(FitError, match="choose from drag, gravity_scale"):
        fit(problem)
    problem = toy_problem(drag=1.0, gravity_scale=1.0)
    problem.model = "no_such_model"
    with pytest.raises(FitError, match="unknown model 'no_such_model'"):
        fit(problem)


def test_toy_problem_file_round_trip(toy: ToyModel, tmp_path: Path) -> None:
    problem = toy_problem(drag=2.0, gravity_scale=0.5)
    loaded = load_problem(save_problem(problem, tmp_path / "toy.npz"))
    assert loaded.model == TOY_NAME
    assert isinstance(loaded.model_settings, ToySettings) and loaded.model_settings == problem.model_settings
    np.testing.assert_array_equal(loaded.targets[-1].positions, problem.targets[-1].positions)


def toy_problem_with(truth: dict[str, float], start: dict[str, float], fit_names: list[str]) -> FitProblem:
    """Targets from ``truth`` by the model itself, any subset fitted."""
    mesh = grid_mesh(3, 3, 1.0, 1.0)
    sim = ToySimulator(mesh, ToySettings(**truth), "cpu", 1)
    x = sim.rollout(max(FRAMES), FRAMES).numpy()
    targets = [Target(f, x[k]) for k, f in enumerate(FRAMES)]
    return FitProblem(mesh, ToySettings(**start), targets, free_parameters=fit_names, model=TOY_NAME)


def test_parameter_floor_and_plausible_range_defaults(toy: ToyModel) -> None:
    drag, gravity = toy.parameters
    assert drag.fit_bounds() == (1e-3, 100.0)  # a positive lower limit is kept
    assert gravity.fit_bounds() == (pytest.approx(1e-3), 10.0)  # 0 becomes 1e-3 of the default
    assert drag.plausible_range() == (pytest.approx(0.1), pytest.approx(10.0))
    floored = Parameter("k", "K", 5.0, (0.0, 50.0), floor=0.01, plausible=(0.5, 500.0))
    assert floored.fit_bounds() == (0.01, 50.0)
    assert floored.plausible_range() == (0.5, 50.0)  # cut to the bounds
    spec = parameter_spec(toy_problem(drag=1.0, gravity_scale=1.0))
    assert spec.bounds["gravity_scale"] == (pytest.approx(1e-3), 10.0)


def test_no_simulation_leaves_the_bounds_from_a_start_on_them(toy: ToyModel, monkeypatch) -> None:
    """Starting on the upper limit, tangents are one-sided: every simulated value stays inside."""
    seen: list[dict[str, float]] = []
    original = ToySimulator.set_params

    def recording(self: ToySimulator, values: dict[str, float]) -> None:
        seen.append(dict(values))
        original(self, values)

    monkeypatch.setattr(ToySimulator, "set_params", recording)
    problem = toy_problem_with(
        {"drag": 0.8, "gravity_scale": 1.3}, {"drag": 100.0, "gravity_scale": 10.0}, ["drag", "gravity_scale"]
    )
    result = fit(problem, FitSettings(optimizer="lm"))
    assert result.outcome == "converged", result.outcome_reason
    assert result.params["drag"] == pytest.approx(0.8, rel=1e-4)
    assert len(seen) > 10
    assert all(1e-3 <= v["drag"] <= 100.0 and 0.0 < v["gravity_scale"] <= 10.0 for v in seen)


def test_truth_on_a_bound_is_found_and_named(toy: ToyModel) -> None:
    problem = toy_problem_with(
        {"drag": 0.8, "gravity_scale": 10.0}, {"drag": 0.8, "gravity_scale": 2.0}, ["gravity_scale"]
    )
    result = fit(problem, FitSettings(optimizer="lm"))
    assert result.outcome == "converged", result.outcome_reason
    assert result.params["gravity_scale"] == 10.0
    assert result.at_bounds == {"gravity_scale": "upper"}
    assert any(w.startswith("gravity_scale ended at its upper limit 10") for w in result.warnings)


def test_fitting_too_few_parameters_is_a_misfit(toy: ToyModel) -> None:
    """Gravity is wrong and not fitted: the best drag leaves the targets off. That is a
    misfit, said in words, never a success; a looser tolerance (noisy targets) accepts it."""
    problem = toy_problem_with(
        {"drag": 0.8, "gravity_scale": 1.3}, {"drag": 2.0, "gravity_scale": 1.0}, ["drag"]
    )
    result = fit(problem, FitSettings(optimizer="lm"))
    assert result.outcome == "misfit"
    assert result.rmse > 100 * result.tolerance
    assert "fit more parameters" in result.outcome_reason and "mm" in result.outcome_reason
    assert (
        result.search["global_phase"]
        and result.search["candidates"] == FitSettings().global_points_per_parameter
    )
    assert math.isfinite(result.params["drag"])
    assert any(
        line.startswith("  outcome: misfit") for line in format_table({**result.summary(), "name": "toy"})
    )
    loose = fit(problem, FitSettings(optimizer="lm", tolerance_m=10.0))
    assert loose.outcome == "converged" and loose.tolerance == 10.0
    # cancelled during the global phase: not a finished search, so not a misfit
    calls = {"n": 0}

    def count() -> bool:
        calls["n"] += 1
        return False

    fit(problem, FitSettings(optimizer="lm"), cancel=count)
    total = calls["n"]
    calls["n"] = 0

    def late() -> bool:
        calls["n"] += 1
        return calls["n"] >= total - 1

    cut = fit(problem, FitSettings(optimizer="lm"), cancel=late)
    assert cut.cancelled and cut.outcome == "stalled" and cut.outcome_reason.startswith("cancelled at RMSE")
    assert cut.search["global_phase"] and cut.params["drag"] == pytest.approx(result.params["drag"], rel=1e-6)


class BrokenToy(ToyModel):
    """Rollouts that raise an unexpected error, or produce NaN everywhere."""

    def __init__(self, name: str, error: Exception | None) -> None:
        self.name = name
        self.error = error

    def build(
        self, geometry: ClothMesh, settings: ToySettings, device: str, precision: str, start_frame: int = 1
    ):
        sim = super().build(geometry, settings, device, precision, start_frame)
        error = self.error

        def rollout(frame_end: int, output_frames=None, goals=None, frozen=None) -> ToyRollout:
            if error is not None:
                raise error
            out = ToySimulator.rollout(sim, frame_end, output_frames, goals, frozen)
            out.positions.fill_(wp.vec3d(math.nan, 0.0, 0.0))
            return out

        sim.rollout = rollout
        return sim


@pytest.mark.parametrize("error", [RuntimeError("boom\nin the solver"), None])
def test_only_fit_error_leaves_fit(error: Exception | None) -> None:
    model = BrokenToy("toy_broken", error)
    register_model(model)
    try:
        problem = toy_problem(drag=1.0, gravity_scale=1.0)
        problem.model = "toy_broken"
        if error is not None:
            with pytest.raises(FitError, match="unexpected error: boom in the solver$"):
                fit(problem)
        else:
            result = fit(problem)  # nothing simulates: a result that says so
            assert result.outcome == "failed" and "diverged" in result.outcome_reason
            assert result.params == {"drag": 1.0, "gravity_scale": 1.0} and math.isnan(result.rmse)
        with pytest.raises(FitError, match="optimizer must be"):
            fit(problem, FitSettings(optimizer="newton"))
    finally:
        unregister_model("toy_broken")


def _imported_modules(path: Path, package: str) -> Iterator[str]:
    """Absolute names of everything ``path`` imports (relative imports resolved)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def _model_imports(path: Path, package: str) -> list[str]:
    return [
        m
        for m in _imported_modules(path, package)
        if m == "warp_core.models.blender_cloth" or m.startswith("warp_core.models.blender_cloth.")
    ]


def test_import_scan_sees_relative_and_absolute_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from ..models.blender_cloth.params import ClothParams\nfrom ..models import get_model\n"
    )
    assert _model_imports(sample, "warp_core.fit")
    sample.write_text("def f():\n    from warp_core.models import blender_cloth\n")
    assert _model_imports(sample, "warp_core.fit")
    sample.write_text("from ..models import get_model\nfrom ..models.base import Parameter\n")
    assert not _model_imports(sample, "warp_core.fit")


def test_fit_engine_does_not_import_a_model() -> None:
    files = sorted(FIT_PACKAGE.rglob("*.py"))
    assert len(files) > 5
    offenders = []
    for path in files:
        package = ".".join(("warp_core",) + path.relative_to(FIT_PACKAGE.parent).parent.parts)
        offenders += [f"{path.name}: {m}" for m in _model_imports(path, package)]
    assert offenders == []
