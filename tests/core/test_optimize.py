"""Optimizers on small pure-numpy problems."""

from __future__ import annotations

import math
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from warp_core.fit.optimizers import run as fit_run
from warp_core.fit.optimizers.adam import adam
from warp_core.fit.optimizers.base import STATIONARY_STOPS, FitDivergedError, OptimizeSettings, RunState
from warp_core.fit.optimizers.global_search import SearchOptions, design_points, search
from warp_core.fit.optimizers.lbfgs import lbfgs, lbfgs_finished_run, lbfgs_run
from warp_core.fit.optimizers.lm import levenberg_marquardt
from warp_core.fit.optimizers.run import Tracker
from warp_core.fit.optimizers.subproblem import minimize_box_quadratic
from warp_core.fit.problem.spec import ParameterSpec
from warp_core.fit.verdict.identifiability import identifiability


class ExpDecay:
    """r = A exp(-k t) - y, data from A=2.5, k=0.7."""

    names = ["amplitude", "rate"]

    def __init__(self) -> None:
        self.t = np.linspace(0.0, 5.0, 40)
        self.y = 2.5 * np.exp(-0.7 * self.t)

    def residuals(self, v: dict[str, float]) -> np.ndarray:
        return v["amplitude"] * np.exp(-v["rate"] * self.t) - self.y

    def jacobian(self, v: dict[str, float]) -> np.ndarray:
        e = np.exp(-v["rate"] * self.t)
        return np.stack([e, -v["amplitude"] * self.t * e], axis=1)


def test_lm_recovers_exponential_decay_from_3x_off() -> None:
    problem = ExpDecay()
    spec = ParameterSpec(problem.names, {"amplitude": 7.5, "rate": 0.7 / 3.0})
    calls = []
    res = levenberg_marquardt(
        problem,
        spec,
        OptimizeSettings(max_iterations=100, rel_loss_tol=1e-14),
        progress=lambda i, loss, v: calls.append(i),
    )
    assert res.values["amplitude"] == pytest.approx(2.5, rel=1e-6)
    assert res.values["rate"] == pytest.approx(0.7, rel=1e-6)
    assert res.stop_reason in ("converged_loss", "converged_gradient")
    assert res.loss_history[0] > res.loss_history[-1]
    assert np.all(np.diff(res.loss_history) < 0.0)
    assert res.best_loss == res.loss_history[-1]
    assert calls[0] == 0 and calls == list(range(len(res.loss_history)))
    assert res.initial_values == {"amplitude": 7.5, "rate": 0.7 / 3.0}
    assert res.jacobian.shape == (40, 2) and res.free_names == ["amplitude", "rate"]
    assert res.n_jacobian_evals == res.iterations + 1


class TiedLinear:
    """y = a x + b x^2 + c, with b tied to a in the fit; data from a=b=2, c=0.5."""

    names = ["a", "b", "c"]

    def __init__(self) -> None:
        self.x = np.linspace(-1.0, 2.0, 25)
        self.y = 2.0 * self.x + 2.0 * self.x**2 + 0.5

    def residuals(self, v: dict[str, float]) -> np.ndarray:
        return v["a"] * self.x + v["b"] * self.x**2 + v["c"] - self.y

    def jacobian(self, v: dict[str, float]) -> np.ndarray:
        return np.stack([self.x, self.x**2, np.ones_like(self.x)], axis=1)


def test_lm_with_tied_pair() -> None:
    problem = TiedLinear()
    spec = ParameterSpec(problem.names, {"a": 0.5, "b": 123.0, "c": 3.0}, ties={"b": "a"})
    assert spec.free_names == ["a", "c"]
    assert spec.from_free(spec.initial_free())["b"] == 0.5  # follower's own initial is ignored
    res = levenberg_marquardt(problem, spec, OptimizeSettings(max_iterations=100, rel_loss_tol=1e-15))
    assert res.values["a"] == pytest.approx(2.0, rel=1e-7)
    assert res.values["b"] == res.values["a"]
    assert res.values["c"] == pytest.approx(0.5, rel=1e-7)
    assert res.jacobian.shape == (25, 2)


def test_log_space_chain_rule_matches_finite_differences() -> None:
    problem = TiedLinear()
    spec = ParameterSpec(problem.names, {"a": 1.3, "c": 0.7}, ties={"b": "a"})
    z = np.array([0.3, -0.4])
    values = spec.from_free(z)
    jac = spec.jacobian_to_free(problem.jacobian(values), values)
    h = 1e-6
    fd = np.zeros_like(jac)
    for k in range(len(z)):
        dz = np.zeros_like(z)
        dz[k] = h
        fd[:, k] = (problem.residuals(spec.from_free(z + dz)) - problem.residuals(spec.from_free(z - dz))) / (
            2 * h
        )
    np.testing.assert_allclose(jac, fd, rtol=1e-7, atol=1e-9)

    # gradient path: dL/dz = J^T r for L = 0.5 |r|^2
    r = problem.residuals(values)
    named_grad = dict(zip(problem.names, problem.jacobian(values).T @ r, strict=True))
    g = spec.gradient_to_free(named_grad, values)
    loss = lambda zz: 0.5 * float(np.sum(problem.residuals(spec.from_free(zz)) ** 2))  # noqa: E731
    fd_g = [(loss(z + h * e) - loss(z - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(g, fd_g, rtol=1e-6)

    # exponential problem (nonlinear in the values)
    exp_problem = ExpDecay()
    spec2 = ParameterSpec(exp_problem.names, {"amplitude": 1.0, "rate": 1.0})
    z2 = np.log([1.7, 0.4])
    v2 = spec2.from_free(z2)
    jac2 = spec2.jacobian_to_free(exp_problem.jacobian(v2), v2)
    fd2 = np.stack(
        [
            (
                exp_problem.residuals(spec2.from_free(z2 + h * e))
                - exp_problem.residuals(spec2.from_free(z2 - h * e))
            )
            / (2 * h)
            for e in np.eye(2)
        ],
        axis=1,
    )
    np.testing.assert_allclose(jac2, fd2, rtol=1e-6, atol=1e-9)


class WithGhost(ExpDecay):
    """Exponential decay plus a parameter that has no effect on the residuals."""

    names = ["amplitude", "rate", "ghost"]

    def jacobian(self, v: dict[str, float]) -> np.ndarray:
        return np.concatenate([super().jacobian(v), np.zeros((len(self.t), 1))], axis=1)


def test_parameter_without_effect_is_flagged_and_stays_finite() -> None:
    problem = WithGhost()
    spec = ParameterSpec(
        problem.names,
        {"amplitude": 5.0, "rate": 0.3, "ghost": 4.0},
        bounds={"ghost": (1e-6, 1e6), "amplitude": (1e-3, 1e3)},
    )
    res = levenberg_marquardt(problem, spec, OptimizeSettings(max_iterations=100))
    assert res.values["amplitude"] == pytest.approx(2.5, rel=1e-5)
    assert math.isfinite(res.values["ghost"]) and res.values["ghost"] == pytest.approx(4.0)
    report = identifiability(res.jacobian, res.free_names, res.values, residual_scale=1.0)
    by_name = {e["name"]: e for e in report}
    assert not by_name["ghost"]["determined"]
    assert by_name["ghost"]["max_change"] == 0.0
    assert by_name["ghost"]["warnings"] == [
        "ghost: x2 changes the target frames by < 0.1 mm; the target does not determine it"
    ]
    assert by_name["amplitude"]["determined"] and by_name["rate"]["determined"]
    # first order: doubling the amplitude doubles the curve, change = ln2 * A e^{-kt}
    assert by_name["amplitude"]["max_change"] == pytest.approx(math.log(2.0) * 2.5, rel=1e-4)


def test_identifiability_flags_collinear_columns_and_scales_units() -> None:
    rng = np.random.default_rng(0)
    col = rng.normal(size=30)
    jac = np.stack([col, -2.0 * col + 1e-6 * rng.normal(size=30), rng.normal(size=30)], axis=1)
    report = identifiability(jac, ["p", "q", "s"], {"p": 1.0, "q": 2.0, "s": 3.0}, residual_scale=1e-3)
    assert report[0]["collinear_with"] == ["q"] and report[1]["collinear_with"] == ["p"]
    assert report[0]["warnings"] == [
        "p and q have the same effect on the target; only their combination is determined"
    ]
    assert report[1]["warnings"] == [] and report[2]["collinear_with"] == []
    assert report[2]["rms_change"] == pytest.approx(np.sqrt(np.mean(jac[:, 2] ** 2)) * 1e-3 * math.log(2.0))
    assert report[2]["value"] == 3.0


class NanAbove:
    """r = p - 10 (optimum at 10), but the problem breaks down above p = 4."""

    names = ["p", "q"]

    def __init__(self, raise_error: bool = False) -> None:
        self.raise_error = raise_error
        self.seen: list[float] = []

    def residuals(self, v: dict[str, float]) -> np.ndarray:
        self.seen.append(v["p"])
        if v["p"] > 4.0:
            if self.raise_error:
                raise FloatingPointError("overflow in the simulation")
            return np.array([np.nan, 0.0])
        return np.array([v["p"] - 10.0, v["q"] - 0.5])

    def jacobian(self, v: dict[str, float]) -> np.ndarray:
        return np.eye(2)


@pytest.mark.parametrize("raise_error", [False, True])
def test_lm_backtracks_on_nan_and_never_returns_nan(raise_error: bool) -> None:
    problem = NanAbove(raise_error)
    spec = ParameterSpec(problem.names, {"p": 1.0, "q": 2.0})
    res = levenberg_marquardt(problem, spec, OptimizeSettings(max_iterations=50))
    assert any(p > 4.0 for p in problem.seen)  # it did try the bad region
    assert all(math.isfinite(v) for v in res.values.values())
    assert 3.5 < res.values["p"] <= 4.0
    # q moves towards 0.5 too, but steps are joint: near the barrier they get damped down
    assert 0.5 <= res.values["q"] < 2.0
    assert all(math.isfinite(x) for x in res.loss_history)
    assert res.best_loss < res.loss_history[0]


def test_divergent_start_raises_or_recovers() -> None:
    problem = NanAbove()
    spec = ParameterSpec(problem.names, {"p": 8.0, "q": 1.0}, bounds={"p": (0.01, 100.0)})
    with pytest.raises(FitDivergedError, match=r"start values p=8, q=1"):
        levenberg_marquardt(problem, spec, OptimizeSettings(recover_from_divergence=False))
    res = levenberg_marquardt(problem, spec, OptimizeSettings(recover_from_divergence=True))
    assert res.initial_values["p"] <= 4.0
    assert res.warnings and "diverged at the start values p=8" in res.warnings[0]
    assert all(math.isfinite(v) for v in res.values.values())

    class AlwaysNan:
        def residuals(self, v: dict[str, float]) -> np.ndarray:
            return np.array([np.inf])

        def jacobian(self, v: dict[str, float]) -> np.ndarray:
            return np.ones((1, 1))

    with pytest.raises(FitDivergedError, match="other start points"):
        levenberg_marquardt(AlwaysNan(), ParameterSpec(["x"], {"x": 1.0}), OptimizeSettings())


def test_bounds_are_respected() -> None:
    problem = ExpDecay()
    spec = ParameterSpec(problem.names, {"amplitude": 1.0, "rate": 0.5}, bounds={"amplitude": (0.1, 2.0)})
    res = levenberg_marquardt(problem, spec, OptimizeSettings(max_iterations=100))
    assert res.values["amplitude"] == pytest.approx(2.0, rel=1e-12)
    assert res.values["amplitude"] <= 2.0
    assert res.stop_reason in ("converged_loss", "converged_gradient", "no_progress")
    # start outside the bounds is clipped in
    spec2 = ParameterSpec(problem.names, {"amplitude": 50.0, "rate": 0.5}, bounds={"amplitude": (0.1, 2.0)})
    assert spec2.from_free(spec2.initial_free())["amplitude"] == pytest.approx(2.0)


def test_cancel_after_two_iterations_returns_best_so_far() -> None:
    problem = ExpDecay()
    spec = ParameterSpec(problem.names, {"amplitude": 25.0, "rate": 0.01})
    flag = threading.Event()
    seen: list[tuple[int, float]] = []

    def progress(i: int, loss: float, v: dict[str, float]) -> None:
        seen.append((i, loss))
        if i == 2:
            flag.set()

    res = levenberg_marquardt(
        problem, spec, OptimizeSettings(max_iterations=100), progress=progress, cancel=flag
    )
    assert res.cancelled and res.stop_reason == "cancelled"
    assert res.iterations == 2 and len(res.loss_history) == 3
    assert res.best_loss == seen[-1][1] == min(res.loss_history)
    assert res.best_loss == pytest.approx(0.5 * np.sum(problem.residuals(res.values) ** 2))

    count = {"n": 0}

    def cancel_callable() -> bool:
        count["n"] += 1
        return count["n"] > 3

    res2 = adam(problem, spec, OptimizeSettings(max_iterations=100), cancel=cancel_callable)
    assert res2.cancelled and res2.best_loss <= res2.loss_history[0]


def test_time_budget_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fit's clock advances one second per residual evaluation and not otherwise: where
    # the budget stops it depends on the work done, never on how busy the machine is
    clock = {"now": 0.0}

    class Slow(ExpDecay):
        def residuals(self, v: dict[str, float]) -> np.ndarray:
            clock["now"] += 1.0
            return super().residuals(v)

    monkeypatch.setattr(fit_run, "time", SimpleNamespace(perf_counter=lambda: clock["now"]))
    spec = ParameterSpec(ExpDecay.names, {"amplitude": 25.0, "rate": 0.01})
    unlimited = levenberg_marquardt(Slow(), spec, OptimizeSettings(max_iterations=1000))
    assert unlimited.stop_reason != "time_budget" and unlimited.n_residual_evals > 4
    res = levenberg_marquardt(Slow(), spec, OptimizeSettings(max_iterations=1000, time_budget_s=4.0))
    assert res.stop_reason == "time_budget"
    # the budget is checked before every step (one evaluation each): the fourth evaluation
    # spends it, no fifth runs
    assert res.n_residual_evals == 4
    assert not res.cancelled and res.best_loss <= res.loss_history[0]
    assert res.loss_history == unlimited.loss_history[: len(res.loss_history)]


class Quadratic12:
    """L = 0.5 sum_k c_k (p_k - p*_k)^2 with 12 parameters of mixed scales."""

    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self.names = [f"k{i}" for i in range(12)]
        self.target = 10.0 ** rng.uniform(-2, 2, size=12)
        self.curv = rng.uniform(0.5, 2.0, size=12) / self.target**2

    def gradient(self, v: dict[str, float]) -> tuple[float, dict[str, float]]:
        p = np.array([v[n] for n in self.names])
        d = p - self.target
        return 0.5 * float(np.sum(self.curv * d * d)), dict(zip(self.names, self.curv * d, strict=True))


def test_adam_converges_on_12_parameter_quadratic() -> None:
    problem = Quadratic12()
    rng = np.random.default_rng(2)
    initial = {
        n: float(t * rng.uniform(0.4, 2.5)) for n, t in zip(problem.names, problem.target, strict=True)
    }
    spec = ParameterSpec(problem.names, initial)
    res = adam(problem, spec, OptimizeSettings(max_iterations=600, adam_lr=0.05, rel_loss_tol=0.0))
    fitted = np.array([res.values[n] for n in problem.names])
    np.testing.assert_allclose(fitted, problem.target, rtol=1e-3)
    assert res.best_loss < 1e-6 * res.loss_history[0]
    assert np.all(np.diff(res.loss_history) <= 0.0)
    assert res.n_gradient_evals >= res.iterations and res.jacobian is None


class Valley:
    """L = 0.5 (log p - log 3)^2 + 0.5 * 50 (log q - log 0.2)^2: one steep direction, where
    momentum carried past the bottom points uphill."""

    names = ["p", "q"]

    def gradient(self, v: dict[str, float]) -> tuple[float, dict[str, float]]:
        a, b = math.log(v["p"] / 3.0), math.log(v["q"] / 0.2)
        loss = 0.5 * a * a + 25.0 * b * b
        return loss, {"p": a / v["p"], "q": 50.0 * b / v["q"]}


def test_adam_drops_its_momentum_after_an_overshoot_instead_of_stopping() -> None:
    # with the momentum kept, every halving of the step after the first overshoot raised the
    # loss and the run stopped as stuck with p at 4.46 instead of 3
    spec = ParameterSpec(Valley.names, {"p": 1.0, "q": 1.0})
    res = adam(Valley(), spec, OptimizeSettings(max_iterations=200, adam_lr=0.5, rel_loss_tol=0.0))
    assert res.values["p"] == pytest.approx(3.0, rel=1e-3)
    assert res.values["q"] == pytest.approx(0.2, rel=1e-3)
    assert np.all(np.diff(res.loss_history) <= 0.0)


def test_lbfgs_converges_on_12_parameter_quadratic_in_far_fewer_steps_than_adam() -> None:
    """The same 12 parameters of mixed scales (targets 0.01-100) from 0.4-2.5x off: the
    quasi-Newton model of the curvature gets there in tens of steps where Adam needs
    hundreds (the loss is quadratic in the values, not their logs, so not in one step)."""
    problem = Quadratic12()
    rng = np.random.default_rng(2)
    initial = {
        n: float(t * rng.uniform(0.4, 2.5)) for n, t in zip(problem.names, problem.target, strict=True)
    }
    spec = ParameterSpec(problem.names, initial)
    res = lbfgs(problem, spec, OptimizeSettings(max_iterations=60, rel_loss_tol=0.0, abs_loss_tol=1e-14))
    fitted = np.array([res.values[n] for n in problem.names])
    np.testing.assert_allclose(fitted, problem.target, rtol=1e-3)
    assert res.stop_reason == "converged_loss" and res.iterations < 60
    assert np.all(np.diff(res.loss_history) <= 0.0)


class NarrowValley:
    """r = (log p, 3e4 (log q - log p)): from log values (1, 1 + 1e-5) the minimum along
    the gradient lies 2e-5 away, with residuals for trial points and a gradient for
    accepted ones."""

    names = ["p", "q"]

    def __init__(self) -> None:
        self.gradients = 0
        self.residual_calls = 0

    def residuals(self, v: dict[str, float]) -> np.ndarray:
        self.residual_calls += 1
        a, b = math.log(v["p"]), math.log(v["q"])
        return np.array([a, 3.0e4 * (b - a)])

    def gradient(self, v: dict[str, float]) -> tuple[float, dict[str, float]]:
        self.gradients += 1
        a, b = math.log(v["p"]), math.log(v["q"])
        d = 9.0e8 * (b - a)
        return 0.5 * (a * a + 9.0e8 * (b - a) ** 2), {"p": (a - d) / v["p"], "q": d / v["q"]}


def test_lbfgs_line_search_reaches_a_valley_far_narrower_than_its_first_step() -> None:
    # the first step moves a log value by 0.25, the minimum along it lies 1e-4 of that
    # away: ten halvings stopped short (no_progress at the start); shorter trials placed
    # by the quadratic through the loss reach it, and they simulate only
    problem = NarrowValley()
    spec = ParameterSpec(NarrowValley.names, {"p": math.e, "q": math.exp(1.0 + 1e-5)})
    res = lbfgs(problem, spec, OptimizeSettings(max_iterations=200, rel_loss_tol=0.0, abs_loss_tol=1e-16))
    assert res.stop_reason == "converged_loss"
    assert res.values["p"] == pytest.approx(1.0, abs=1e-6)
    assert res.values["q"] == pytest.approx(1.0, abs=1e-6)
    assert np.all(np.diff(res.loss_history) <= 0.0)
    assert problem.residual_calls > 0
    assert problem.gradients == res.n_gradient_evals
    assert res.n_gradient_evals <= 2 * res.iterations + 2


class BiasedSlope:
    """r = (log p - log 3, 10 (log q - log 0.2)) with exact residuals and Jacobian but a
    gradient off by a fixed 1e-4 in log space, as the stable gradient is near an optimum:
    descent along it settles where the biased slope vanishes, not at the minimum."""

    names = ["p", "q"]
    bias = np.array([1e-4, -1e-4])

    def residuals(self, v: dict[str, float]) -> np.ndarray:
        return np.array([math.log(v["p"] / 3.0), 10.0 * math.log(v["q"] / 0.2)])

    def log_jacobian(self, v: dict[str, float]) -> np.ndarray:
        return np.diag([1.0, 10.0])

    def gradient(self, v: dict[str, float]) -> tuple[float, dict[str, float]]:
        r = self.residuals(v)
        g_log = self.log_jacobian(v).T @ r + self.bias
        return 0.5 * float(r @ r), {"p": g_log[0] / v["p"], "q": g_log[1] / v["q"]}


def _finish_start(problem: BiasedSlope, spec: ParameterSpec) -> RunState:
    values = dict(spec.initial)
    return RunState(spec.to_free(values), problem.residuals(values), None, 1.0, values)


def test_a_finished_lbfgs_run_reaches_the_minimum_its_biased_gradient_misses() -> None:
    problem = BiasedSlope()
    spec = ParameterSpec(BiasedSlope.names, {"p": 1.0, "q": 1.0})
    settings = OptimizeSettings(max_iterations=200, rel_loss_tol=1e-12, abs_loss_tol=1e-20)
    alone = lbfgs_run(problem, spec, settings, Tracker(settings, None, None), _finish_start(problem, spec))
    # the biased slope vanishes 1e-4 off in log p and 1e-6 off in log q: loss ~5e-9
    assert alone.best_loss > 1e-9 and alone.finished_by is None
    tracker = Tracker(settings, None, None)
    finished = lbfgs_finished_run(problem, spec, settings, tracker, _finish_start(problem, spec))
    assert finished.finished_by == "trust_region" and finished.stationary
    assert finished.best_loss <= 1e-20
    assert finished.values["p"] == pytest.approx(3.0, rel=1e-9)
    assert finished.values["q"] == pytest.approx(0.2, rel=1e-9)
    # one history over both methods, falling throughout, as the tracker reported it
    assert np.all(np.diff(finished.loss_history) <= 0.0)
    assert finished.iterations == len(finished.loss_history) - 1 == tracker.steps
    assert finished.n_gradient_evals > 0 and finished.n_jacobian_evals > 0


def test_a_finished_lbfgs_run_keeps_to_the_budgets_it_shares() -> None:
    # with the iterations spent by the L-BFGS steps the trust region never starts
    problem = BiasedSlope()
    spec = ParameterSpec(BiasedSlope.names, {"p": 1.0, "q": 1.0})
    settings = OptimizeSettings(max_iterations=3, rel_loss_tol=0.0, abs_loss_tol=1e-20)
    found = lbfgs_finished_run(
        problem, spec, settings, Tracker(settings, None, None), _finish_start(problem, spec)
    )
    assert found.stop_reason == "max_iterations" and found.finished_by is None
    assert found.n_jacobian_evals == 1  # the Gauss-Newton curvature's at the start, no trust region's


def test_lbfgs_stops_at_a_bound_the_optimum_lies_beyond() -> None:
    spec = ParameterSpec(Valley.names, {"p": 1.0, "q": 1.0}, bounds={"p": (0.1, 2.0), "q": (0.01, 10.0)})
    res = lbfgs(Valley(), spec, OptimizeSettings(max_iterations=100, rel_loss_tol=0.0))
    assert res.values["p"] == pytest.approx(2.0, rel=1e-12)  # the optimum, 3, is outside
    assert res.values["q"] == pytest.approx(0.2, rel=1e-4)
    assert np.all(np.diff(res.loss_history) <= 0.0)


def test_adam_uses_residuals_when_no_gradient_and_backtracks_on_nan() -> None:
    problem = NanAbove()
    spec = ParameterSpec(problem.names, {"p": 1.0, "q": 2.0})
    res = adam(problem, spec, OptimizeSettings(max_iterations=300, adam_lr=0.2))
    assert all(math.isfinite(v) for v in res.values.values())
    assert 3.0 < res.values["p"] <= 4.0
    assert res.n_residual_evals > 0 and res.n_gradient_evals == 0


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="no chains"):
        ParameterSpec(["a", "b", "c"], {"a": 1.0}, ties={"b": "a", "c": "b"})
    with pytest.raises(ValueError, match="> 0"):
        ParameterSpec(["a"], {"a": 0.0})
    with pytest.raises(ValueError, match="disjoint"):
        ParameterSpec(["a", "b"], {"a": 1.0}, bounds={"a": (1.0, 2.0), "b": (3.0, 4.0)}, ties={"b": "a"})
    spec = ParameterSpec(["a", "b"], {"a": 1.0, "b": 2.0}, bounds={"a": (0.0, 10.0)})
    assert spec.log_lower[0] == -np.inf and spec.log_upper[0] == pytest.approx(math.log(10.0))


# ---------------------------------------------------------------- trust region and search


def test_trust_region_bounds_every_log_step() -> None:
    """From 1000x off, no step moves a log value by more than the trust radius: ln 4 at
    first, at most ln 64 ever (plain Gauss-Newton would jump straight past the answer)."""
    problem = ExpDecay()
    spec = ParameterSpec(problem.names, {"amplitude": 2500.0, "rate": 0.7})
    seen: list[dict[str, float]] = []
    res = levenberg_marquardt(
        problem, spec, OptimizeSettings(max_iterations=100), progress=lambda i, loss, v: seen.append(v)
    )
    assert res.values["amplitude"] == pytest.approx(2.5, rel=1e-6)
    steps = [abs(math.log(b["amplitude"] / a["amplitude"])) for a, b in zip(seen, seen[1:], strict=False)]
    assert steps[0] <= math.log(4.0) + 1e-12
    assert max(steps) <= math.log(64.0) + 1e-12
    assert len(steps) >= math.log(1000.0) / math.log(64.0)


class Parabola:
    """y = a x fitted to y = x^2 data: the best a leaves a residual (a misfit)."""

    names = ["a"]

    def __init__(self) -> None:
        self.x = np.linspace(0.5, 2.0, 20)

    def residuals(self, v: dict[str, float]) -> np.ndarray:
        return v["a"] * self.x - self.x**2

    def jacobian(self, v: dict[str, float]) -> np.ndarray:
        return self.x[:, None]


def test_stationary_point_with_residual_is_reported_as_such() -> None:
    problem = Parabola()
    res = levenberg_marquardt(problem, ParameterSpec(["a"], {"a": 0.1}), OptimizeSettings(grad_tol=0.0))
    best = float(np.sum(problem.x**3) / np.sum(problem.x**2))
    assert res.values["a"] == pytest.approx(best, rel=1e-6)
    assert res.stationary and res.stop_reason in STATIONARY_STOPS
    assert res.best_loss > 0.1
    assert res.state is not None and res.state.radius > 0.0


def test_rejected_step_shrinks_the_region_and_retries() -> None:
    """Beyond p = 4 the problem cannot be evaluated: steps into it are rejected, the region
    shrinks, and the run creeps up to the barrier instead of giving up."""
    problem = NanAbove()
    res = levenberg_marquardt(problem, ParameterSpec(problem.names, {"p": 3.0, "q": 0.5}), OptimizeSettings())
    assert 3.9 < res.values["p"] <= 4.0
    assert res.n_residual_evals > res.iterations + 1  # some trials were rejected
    assert res.stop_reason == "no_progress" and res.stationary  # collapsed at the barrier


def test_steps_stop_at_bounds_and_weak_parameters_are_held() -> None:
    problem = WithGhost()
    spec = ParameterSpec(
        problem.names, {"amplitude": 0.5, "rate": 0.7, "ghost": 3.0}, bounds={"amplitude": (0.1, 2.0)}
    )
    seen: list[dict[str, float]] = []
    res = levenberg_marquardt(
        problem, spec, OptimizeSettings(max_iterations=50), progress=lambda i, loss, v: seen.append(v)
    )
    assert all(v["amplitude"] <= 2.0 for v in seen)
    assert res.values["amplitude"] == 2.0  # exactly on the bound, not past it by rounding
    assert all(v["ghost"] == pytest.approx(3.0, rel=1e-15) for v in seen) and res.held == ["ghost"]


def test_box_quadratic_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 5))
        m = rng.normal(size=(n + 1, n)) * 10.0 ** rng.uniform(-2, 2, size=n)
        a = m.T @ m + 1e-6 * np.eye(n)
        g = rng.normal(size=n)
        lower, upper = -rng.uniform(0.0, 1.0, n), rng.uniform(0.0, 1.0, n)
        s = minimize_box_quadratic(a, g, lower, upper)
        assert np.all(s >= lower) and np.all(s <= upper)

        def f(x: np.ndarray, a: np.ndarray = a, g: np.ndarray = g) -> float:
            return float(0.5 * x @ a @ x + g @ x)

        # every vertex/face combination: fix each variable free, at lower or at upper
        best = math.inf
        for sides in np.ndindex(*(3,) * n):
            free = np.array(sides) == 0
            x = np.where(np.array(sides) == 1, lower, upper)
            if free.any():
                rhs = -(g[free] + a[np.ix_(free, ~free)] @ x[~free])
                x[free] = np.linalg.solve(a[np.ix_(free, free)], rhs)
            if np.all(x >= lower - 1e-12) and np.all(x <= upper + 1e-12):
                best = min(best, f(x))
        assert f(s) <= best + 1e-12 * (1.0 + abs(best))


class TwoValleys:
    """r = ((u - 1.5)(u + 2), tilt (u - 1.5)) with u = log(p): an exact fit at p = e^1.5, and
    a local minimum with a residual near p = e^-1.93, where descent from a small start ends."""

    names = ["p"]
    tilt = 0.5

    def residuals(self, v: dict[str, float]) -> np.ndarray:
        u = math.log(v["p"])
        return np.array([(u - 1.5) * (u + 2.0), self.tilt * (u - 1.5)])

    def jacobian(self, v: dict[str, float]) -> np.ndarray:
        u = math.log(v["p"])
        return (np.array([2.0 * u + 0.5, self.tilt]) / v["p"])[:, None]


def test_global_phase_leaves_a_local_minimum_and_stops_once_matched() -> None:
    problem = TwoValleys()
    spec = ParameterSpec(["p"], {"p": math.exp(-2.5)}, bounds={"p": (1e-3, 1e3)})
    settings = OptimizeSettings(max_iterations=60, grad_tol=0.0, abs_loss_tol=1e-20)
    local = search(problem, spec, settings, SearchOptions(enabled=False, matched_loss=1e-12))
    assert local.result.values["p"] < 1.0 and local.result.best_loss > 1e-3  # trapped
    assert not local.global_phase and local.candidates == 0
    options = SearchOptions(plausible={"p": (0.01, 100.0)}, per_parameter=3, refine=2, matched_loss=1e-12)
    found = search(problem, spec, settings, options)
    assert found.global_phase and found.candidates == 3
    assert found.result.values["p"] == pytest.approx(math.exp(1.5), rel=1e-6)
    assert found.refined == 1  # matched after the first refinement: no second one
    assert found.iterations == len(found.losses) - 1


def test_global_phase_around_lbfgs_leaves_a_local_minimum_too() -> None:
    # the same two valleys with L-BFGS as the local method (its gradient from J^T r here):
    # descent from the start ends in the valley with a residual, a design start leads out
    problem = TwoValleys()
    spec = ParameterSpec(["p"], {"p": math.exp(-2.5)}, bounds={"p": (1e-3, 1e3)})
    settings = OptimizeSettings(max_iterations=200, grad_tol=0.0, rel_loss_tol=1e-12, abs_loss_tol=1e-20)
    options = SearchOptions(enabled=False, matched_loss=1e-12)
    local = search(problem, spec, settings, options, local_method=lbfgs_run)
    assert local.result.values["p"] < 1.0 and local.result.best_loss > 1e-3  # trapped
    assert local.result.stationary and not local.global_phase
    options = SearchOptions(plausible={"p": (0.01, 100.0)}, per_parameter=3, refine=2, matched_loss=1e-12)
    found = search(problem, spec, settings, options, local_method=lbfgs_run)
    assert found.global_phase and found.candidates == 3 and found.refined >= 1
    assert found.result.values["p"] == pytest.approx(math.exp(1.5), rel=1e-5)
    assert found.result.best_loss <= 1e-12
    assert found.iterations == len(found.losses) - 1


class ShallowTrap(TwoValleys):
    """TwoValleys with the trap's residual 10x smaller (a loss of 0.0153 there): a refinement
    from a design start stays above it for its first step."""

    tilt = 0.05


def test_a_global_phase_cut_by_the_iteration_limit_says_so() -> None:
    # 5 steps: 4 to the trap, 1 of a refinement that is still above it (measured 0.0741).
    # The best values are the trap's optimum, but the limit, not the search, ended the fit:
    # "max_iterations" (stalled), not an optimum's stop (which reads as a misfit)
    problem = ShallowTrap()
    spec = ParameterSpec(["p"], {"p": math.exp(-2.5)}, bounds={"p": (1e-3, 1e3)})
    options = SearchOptions(plausible={"p": (0.01, 100.0)}, per_parameter=3, refine=2, matched_loss=1e-12)
    limited = {"grad_tol": 0.0, "abs_loss_tol": 1e-20}
    cut = search(problem, spec, OptimizeSettings(max_iterations=5, **limited), options)
    assert cut.global_phase and cut.refined == 1 and cut.iterations == 5
    assert cut.result.values["p"] < 1.0 and cut.result.best_loss > 1e-3  # still the trap's
    assert cut.result.stop_reason == "max_iterations" and not cut.result.stationary
    room = search(problem, spec, OptimizeSettings(max_iterations=12, **limited), options)
    assert room.result.values["p"] == pytest.approx(math.exp(1.5), rel=1e-6)


def test_design_points_fill_the_plausible_box_and_repeat() -> None:
    spec = ParameterSpec(
        ["a", "b", "c"], {"a": 1.0, "b": 1.0, "c": 1.0}, ties={"c": "a"}, bounds={"b": (0.5, 4.0)}
    )
    plausible = {"a": (1.0, 1000.0), "b": (0.1, 10.0)}
    points = design_points(spec, plausible, 3)
    assert len(points) == 6 and all(p.shape == (2,) for p in points)
    a = np.array([p[0] for p in points])
    b = np.array([p[1] for p in points])
    assert np.all((a > 0.0) & (a < math.log(1000.0)))
    assert np.all((b >= math.log(0.5)) & (b <= math.log(4.0)))  # plausible cut to the bounds
    assert len(np.unique(np.round(a, 9))) == 6  # one point per stratum of each parameter
    again = design_points(spec, plausible, 3)
    assert all(np.array_equal(p, q) for p, q in zip(points, again, strict=True))


class LogLinear:
    """r = D (log v - log v*) with curvatures 1 to 1e6 apart between the log values (as
    stiffness and damping are), exact gradient and log-space Jacobian: Gauss-Newton's
    model is the loss itself."""

    names = ["a", "b", "c"]
    scale = np.array([1.0, 30.0, 1000.0])
    optimum = np.array([2.0, 0.5, 40.0])

    def __init__(self) -> None:
        self.gradients = 0

    def residuals(self, v: dict[str, float]) -> np.ndarray:
        z = np.log([v[n] for n in self.names])
        return self.scale * (z - np.log(self.optimum))

    def log_jacobian(self, v: dict[str, float]) -> np.ndarray:
        return np.diag(self.scale)

    def gradient(self, v: dict[str, float]) -> tuple[float, dict[str, float]]:
        self.gradients += 1
        r = self.residuals(v)
        g_log = self.scale * r
        return 0.5 * float(r @ r), {n: g_log[k] / v[n] for k, n in enumerate(self.names)}


def test_a_finished_lbfgs_run_steps_with_gauss_newton_curvature() -> None:
    # every start value within the trust region's start radius (x4) of the optimum: the
    # step that minimises J^T J's model is the optimum, where a scaled identity needs many
    problem = LogLinear()
    spec = ParameterSpec(LogLinear.names, {"a": 1.0, "b": 1.5, "c": 20.0})
    settings = OptimizeSettings(max_iterations=100, rel_loss_tol=0.0, abs_loss_tol=1e-20)
    tracker = Tracker(settings, None, None)
    found = lbfgs_finished_run(problem, spec, settings, tracker, _finish_start(problem, spec))
    assert found.finished_by is None  # L-BFGS got there on its own
    assert found.loss_history[1] <= 1e-10 * found.loss_history[0]  # the first step, to its ridge
    assert found.best_loss <= 1e-20 and found.iterations <= 3
    assert found.n_jacobian_evals == 1  # the curvature's, at the start
    for k, name in enumerate(LogLinear.names):
        assert found.values[name] == pytest.approx(LogLinear.optimum[k], rel=1e-9)
    plain = lbfgs_run(problem, spec, settings, Tracker(settings, None, None), _finish_start(problem, spec))
    assert plain.iterations > 5 * found.iterations


def test_gauss_newton_curvature_steps_stay_in_the_start_radius_and_the_bounds() -> None:
    problem = LogLinear()
    # c's optimum, 40, is 400x from its start; b's bound stops it at 0.8
    spec = ParameterSpec(LogLinear.names, {"a": 1.0, "b": 1.5, "c": 0.1}, bounds={"b": (0.8, 10.0)})
    settings = OptimizeSettings(max_iterations=100, rel_loss_tol=0.0, abs_loss_tol=1e-20)
    tracker = Tracker(settings, None, None)
    found = lbfgs_finished_run(problem, spec, settings, tracker, _finish_start(problem, spec))
    assert found.values["b"] == pytest.approx(0.8, rel=1e-12)
    assert found.values["a"] == pytest.approx(2.0, rel=1e-9)
    assert found.values["c"] == pytest.approx(40.0, rel=1e-9)
    # log 400 / log 4: at least five steps of the radius for c, none past it
    assert found.iterations >= math.ceil(math.log(400.0) / settings.trust_radius)
    assert np.all(np.diff(found.loss_history) <= 0.0)
