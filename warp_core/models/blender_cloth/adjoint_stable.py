"""The ``stable`` reverse of a substep: the exact one, guarded by an implicit-solve one.

The exact reverse differentiates every CG iteration, step lengths and directions included.
On most substeps that is the right slope of Blender's truncated solver, but on some the
derivatives of the step lengths amplify the adjoint without bound (measured: 1e16-1e49 on
Blender-made scenes whose +-1 % slopes are O(1)).

The implicit reverse keeps the forward's truncated solution dv but differentiates
dv = A^-1 b by the implicit function theorem: with the adjoint lambda of
(S A S) lambda = S g, where g is the loss's gradient with respect to dv,

    d loss = lambda . (db - dA dv),

so the forces and the assembly are differentiated by Warp's autodiff with rhs.grad =
lambda and system.grad = -lambda dv^T, and no CG iteration is. A is symmetric (Blender's
CG assumes it). It never explodes, but it is the gradient of a model whose every solve is
exact, evaluated along the truncated model's trajectory: biased where the truncation
matters (stiff springs resolved by few iterations: measured up to 7x off the slope). The
bias vanishes as the CG tolerance goes to 0. The adjoint solve goes to ``ADJOINT_TOLERANCE``:
stopped at Blender's tolerance instead, bench/gradients.py's statistics did not change, but
an 11-parameter L-BFGS fit (robustness seed 13, scene 2) stopped after 22 steps at 0.82 mm
RMSE where it had gone on for 44 to 0.063 mm.

The stable reverse runs both from the same incoming adjoint and keeps the exact one unless
its (x, v) adjoint is more than ``GUARD_FACTOR`` times the implicit one's (or not finite).
Against the +-1 % slope on 20 Blender-made scenes x 3 starts (bench/gradients.py): sign
right for 96 % of parameters and within 2x for 91 %, where the exact reverse alone gave 86 %
and 69 % and the implicit one alone 94 % and 80 %; the guard factor was chosen there (10
let explosions through). On 20 other scenes: 93 % and 84 % (exact 75 % and 53 %).
"""

import functools

import warp as wp

from ...capture import graph_capture
from .buffers import SubstepBuffers
from .force_kernels import NO_FMA, force_kernels
from .state import ClothState
from .step import CGControl, SubstepInputs, SubstepSolver

ADJOINT_TOLERANCE = 1.0e-10  # r.r <= 1e-10 |S g|^2 (or the forward's, if smaller)
GUARD_FACTOR = 2.0  # the exact reverse of a substep is kept unless its adjoint is this much larger


@functools.cache
def _kernels(dtype):
    fk = force_kernels(dtype)
    vec3, mat33 = fk.vec3, fk.mat33

    @wp.kernel(module="unique", module_options=NO_FMA)
    def solve_adjoint_vertices(
        adjoint: wp.array(dtype=vec3),
        dv: wp.array(dtype=vec3),
        rhs_grad: wp.array(dtype=vec3),
        diag_grad: wp.array(dtype=mat33),
    ):
        # d loss / d b = lambda and d loss / d A_ii = -lambda_i dv_i^T
        i = wp.tid()
        rhs_grad[i] = adjoint[i]
        diag_grad[i] = -wp.outer(adjoint[i], dv[i])

    @wp.kernel(module="unique", module_options=NO_FMA)
    def solve_adjoint_springs(
        adjoint: wp.array(dtype=vec3),
        dv: wp.array(dtype=vec3),
        spring_vertices: wp.array(dtype=wp.vec2i),
        offdiag_grad: wp.array(dtype=mat33),
    ):
        # a spring's block is both A_ab and A_ba
        s = wp.tid()
        a = spring_vertices[s][0]
        b = spring_vertices[s][1]
        offdiag_grad[s] = -(wp.outer(adjoint[a], dv[b]) + wp.outer(adjoint[b], dv[a]))

    @wp.kernel(module="unique", module_options=NO_FMA)
    def guard(
        kept_x: wp.array(dtype=vec3),
        kept_v: wp.array(dtype=vec3),
        kept_params: wp.array(dtype=dtype),
        norms: wp.array(dtype=dtype),
        factor: dtype,
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        params: wp.array(dtype=dtype),
    ):
        # norms: |exact x|^2, |exact v|^2, |kept x|^2, |kept v|^2; a NaN compares false
        i = wp.tid()
        if not (norms[0] + norms[1] <= factor * factor * (norms[2] + norms[3])):
            if i < x.shape[0]:
                x[i] = kept_x[i]
                v[i] = kept_v[i]
            if i < params.shape[0]:
                params[i] = kept_params[i]

    @wp.kernel(module="unique", module_options=NO_FMA)
    def guard_scalars(
        kept: wp.array(dtype=dtype), norms: wp.array(dtype=dtype), factor: dtype, out: wp.array(dtype=dtype)
    ):
        # the same choice as ``guard`` for one more gradient array (a weight map's)
        i = wp.tid()
        if not (norms[0] + norms[1] <= factor * factor * (norms[2] + norms[3])):
            out[i] = kept[i]

    return solve_adjoint_vertices, solve_adjoint_springs, guard, guard_scalars


class ImplicitSubstepReverse:
    """Reverses substeps of one simulator with the implicit solve adjoint; holds the work
    arrays of one backward pass."""

    def __init__(self, solver: SubstepSolver, make_buffers, tolerance: float) -> None:
        a = solver.arrays
        self.solver = solver
        self.buf: SubstepBuffers = make_buffers(1, True)  # forces and assembly, with gradients
        self.cg: SubstepBuffers = make_buffers(2, False)  # both solves, ping-pong
        self.dv = wp.zeros(
            a.vertex_count, dtype=solver.kernels.forces.vec3, device=a.device, requires_grad=True
        )
        self.vertex_kernel, self.spring_kernel = _kernels(a.dtype)[:2]
        for kernel in (self.vertex_kernel, self.spring_kernel):
            wp.load_module(kernel.module, device=a.device)  # a graph capture must not load it
        self.tolerance = min(tolerance, ADJOINT_TOLERANCE)  # of the adjoint solve
        self.graphs: dict = {}  # captured reverses, by substep index within the frame
        self._tapes: tuple = ()

    def _solve(self, rhs: wp.array, control: CGControl) -> wp.array:
        """The CG on the system copied into ``self.cg`` with right-hand side ``rhs``; its
        solution."""
        cg = self.cg
        wp.copy(cg.rhs, rhs)
        launched = self.solver.solve(cg, control)
        return cg.dv[launched % 2]

    def reverse(
        self,
        settings,
        params: wp.array,
        start: ClothState,
        inputs: SubstepInputs,
        out: ClothState,
        iterations: int,
        graph_key: int | None = None,
    ) -> None:
        """Given the loss's gradient after the substep in ``out.x.grad`` and ``out.v.grad``,
        add its gradient before the substep into ``start``'s and ``params``' gradients (read
        them, then ``zero``). ``iterations``: the forward's CG iteration count here. With a
        ``graph_key`` (the substep's index in the frame; the arrays passed must be the same
        on every call with that key) the reverse is captured once and replayed, both solves
        in the captured CG loop or blocks (``cg.py``)."""
        if graph_key is None:
            self._reverse(settings, params, start, inputs, out, iterations, in_graph=False)
            return
        self.cg.frozen.fill_(iterations)
        if graph_key not in self.graphs:
            d = self.solver.arrays.device
            with graph_capture(d, force_module_load=False) as capture:
                self._reverse(settings, params, start, inputs, out, iterations, in_graph=True)
            self.graphs[graph_key] = capture.graph
        wp.capture_launch(self.graphs[graph_key])

    def _reverse(
        self,
        settings,
        params: wp.array,
        start: ClothState,
        inputs: SubstepInputs,
        out: ClothState,
        iterations: int,
        in_graph: bool,
    ) -> None:
        solver = self.solver
        a = solver.arrays
        buf = self.buf
        system = wp.Tape()
        with system:
            v = solver.forces(settings, buf, params, start, inputs)
            solver.assemble(buf, params, v, inputs.h)
        # both solves work on this system
        wp.copy(self.cg.system_diag, buf.system_diag)
        wp.copy(self.cg.system_offdiag, buf.system_offdiag)
        # in a graph the forward's count comes from cg.frozen, as the caller set it
        forward = CGControl(frozen_count=iterations, in_graph=in_graph)
        wp.copy(self.dv, self._solve(buf.rhs, forward))
        update = wp.Tape()
        with update:
            solver.finish(ClothState(start.x, v), self.dv, inputs, out)
        update.backward()
        self._tapes = (system, update)
        if in_graph:
            self.cg.frozen.fill_(-1)  # the adjoint solve stops on the tolerance
        adjoint = self._solve(self.dv.grad, CGControl(tolerance=self.tolerance, in_graph=in_graph))
        wp.launch(
            self.vertex_kernel,
            dim=a.vertex_count,
            device=a.device,
            inputs=[adjoint, self.dv],
            outputs=[buf.rhs.grad, buf.system_diag.grad],
        )
        wp.launch(
            self.spring_kernel,
            dim=a.spring_count,
            device=a.device,
            inputs=[adjoint, self.dv, a.spring_vertices],
            outputs=[buf.system_offdiag.grad],
        )
        system.backward()

    def zero(self) -> None:
        """Clear every gradient the last ``reverse`` wrote."""
        for tape in self._tapes:
            tape.zero()
        self.dv.grad.zero_()


class SubstepGuard:
    """Holds one substep's implicit reverse (``keep``) and puts it in place of the exact
    one where the exact one amplified the adjoint more (``choose``): device work only, so
    it can sit inside a captured graph. ``extras``: more gradient arrays the reverse writes
    (a weight map's, ``maps.MapRecorder``), kept and chosen alike."""

    def __init__(self, solver: SubstepSolver, n_params: int, extras: tuple[wp.array, ...] = ()) -> None:
        a = solver.arrays
        vec3 = solver.kernels.forces.vec3
        self.solver = solver
        self.x = wp.zeros(a.vertex_count, dtype=vec3, device=a.device)
        self.v = wp.zeros(a.vertex_count, dtype=vec3, device=a.device)
        self.params = wp.zeros(n_params, dtype=a.dtype, device=a.device)
        self.partials = wp.zeros((4, solver.dot_columns), dtype=a.dtype, device=a.device)
        self.norms = wp.zeros(4, dtype=a.dtype, device=a.device)
        self.extras = extras
        self.kept_extras = tuple(wp.zeros_like(e) for e in extras)
        self.kernel, self.scalar_kernel = _kernels(a.dtype)[2:]
        self.factor = a.dtype(GUARD_FACTOR)
        for kernel in (self.kernel, self.scalar_kernel):
            wp.load_module(kernel.module, device=a.device)  # a graph capture must not load it

    def keep(self, x_grad: wp.array, v_grad: wp.array, param_grad: wp.array) -> None:
        wp.copy(self.x, x_grad)
        wp.copy(self.v, v_grad)
        wp.copy(self.params, param_grad)
        for kept, extra in zip(self.kept_extras, self.extras, strict=True):
            wp.copy(kept, extra)

    def choose(self, x_grad: wp.array, v_grad: wp.array, param_grad: wp.array) -> None:
        """Overwrite the exact reverse's gradients with the kept ones where it exploded."""
        dot = self.solver.dot
        for row, a in enumerate((x_grad, v_grad, self.x, self.v)):
            dot(a, a, row, self.partials, self.norms)
        wp.launch(
            self.kernel,
            dim=max(x_grad.shape[0], param_grad.shape[0]),
            device=self.solver.arrays.device,
            inputs=[self.x, self.v, self.params, self.norms, self.factor],
            outputs=[x_grad, v_grad, param_grad],
        )
        for kept, extra in zip(self.kept_extras, self.extras, strict=True):
            wp.launch(
                self.scalar_kernel,
                dim=extra.shape[0],
                device=self.solver.arrays.device,
                inputs=[kept, self.norms, self.factor],
                outputs=[extra],
            )
