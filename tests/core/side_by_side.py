"""A Jacobian taken on one simulator and on two side by side (``rollout_pool.RolloutPool``), for
the tests that compare them: shared by the models' tests."""

from __future__ import annotations

import numpy as np

from warp_core.fit import FitProblem, FitSettings
from warp_core.fit.objective import tangents
from warp_core.fit.objective.objective import FitObjective
from warp_core.fit.problem.spec import parameter_spec


def jacobians_by_workers(
    monkeypatch, problem: FitProblem, settings: FitSettings, moved: dict[str, float]
) -> dict[int, tuple[np.ndarray, np.ndarray, int]]:
    """workers (1, 2) -> (the log Jacobian at the spec's start, the one at the start with
    ``moved``, the rollouts the objective counted), each from a new objective."""
    spec = parameter_spec(problem)
    found = {}
    for workers in (1, 2):
        monkeypatch.setattr(tangents, "cpu_workers", lambda *_args, w=workers: w)
        objective = FitObjective(problem, settings, spec.names, spec=spec)
        values = spec.initial_values()
        first = objective.log_jacobian(values)  # the second simulator is built and warmed here
        again = objective.log_jacobian({**values, **moved})
        found[workers] = (first, again, objective.n_forward)
    return found
