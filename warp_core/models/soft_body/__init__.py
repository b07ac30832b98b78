"""The ``soft_body`` model: a mesh embedded in a tetrahedral lattice and simulated as a
stable Neo-Hookean soft body by Newton's VBD solver.

- ``params``: the settings (:class:`SoftBodyParams`, :class:`Collider`) and parameter bounds;
- ``lattice``: the tetrahedral lattice a surface mesh is embedded in;
- ``motion``: where pinned nodes and moving colliders are, frame by frame;
- ``scene``: the Newton model, solver and contacts of one soft body;
- ``kernels``: the Warp kernels around Newton's step (pins, colliders, embedding);
- ``simulator``: :class:`SoftBodySimulator` and its rollouts;
- ``adjoint``, ``adjoint_kernels``: the gradient of a rollout by the implicit-function
  theorem (the adjoint of VBD's converged substeps);
- ``model``: the registry entry (``MODEL``).

Newton is imported with the simulator, on first use: the parameter table (what the add-on
lists when it registers) does not need it, and importing Newton takes seconds.
"""

from typing import Any

from .lattice import Lattice, build_lattice
from .model import MODEL, SoftBodyModel
from .params import PARAMETER_BOUNDS, PARAMETER_NAMES, Collider, SoftBodyParams


def __getattr__(name: str) -> Any:
    if name in ("SoftBodyRollout", "SoftBodySimulator"):
        from . import simulator

        return getattr(simulator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MODEL",
    "PARAMETER_BOUNDS",
    "PARAMETER_NAMES",
    "Collider",
    "Lattice",
    "SoftBodyModel",
    "SoftBodyParams",
    "SoftBodyRollout",
    "SoftBodySimulator",
    "build_lattice",
]
