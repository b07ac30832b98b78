"""The soft-body adjoint's linear solve kept on its device (``adjoint_device``): the BiCGStab
of ``adjoint_step.solve_adjoint``, step for step and with its stopping rules, on float64
vectors (``wp.vec3d``) in Warp arrays.

Its scalars (rho, alpha, omega, the dot products, the products taken, the best residual and
whether the solve still runs) live in one small float64 device array that the kernels read
and write; every kernel of an iteration does nothing once the solve has stopped, so the host
launches :data:`SOLVE_CHECK` iterations at a time (one captured graph where graphs are on) and
reads that array once after each batch, where ``solve_adjoint`` checks its true residual.
In a captured batch each iteration's body is a conditional node (``wp.capture_if``) that runs
only while the solve does; launched one by one, the iterations past the stop run their
kernels as no-ops and their products for nothing (wasted work, not wrong numbers).

The dot products of an iteration are each taken in one kernel of one block with the scalars'
updates that read them (``_block_dot``: a launch instead of three); the launches of a batch,
not its arithmetic, were most of its time on a 10k-node body on an H100. The start's is a
``device_dots.Dots``.
"""

from __future__ import annotations

from collections.abc import Callable

import warp as wp

from ...capture import CaptureOnWorker, graph_capture
from .adjoint_step import (
    SOLVE_ACCEPT,
    SOLVE_CHECK,
    SOLVE_MAX_ITERATIONS,
    SOLVE_STALL,
    SOLVE_TOLERANCE,
    not_converged,
)
from .device_dots import Dots

__all__ = ["TOLERANCE", "DeviceBiCGStab", "captured"]

# the lanes of the solve's one-block kernels (its dot products and the scalars' updates that
# read them: a launch each instead of three)
SOLVE_LANES = 512

# the slots of the solve's scalars: its dot products first, then its state
RHO_NEXT, SV, SS, TS, TT, RR, BB = range(7)
RHO, ALPHA, OMEGA, BETA, NORM, PRODUCTS = range(7, 13)
BEST_AT, BEST_RESIDUAL, ACTIVE, OUTCOME, RESIDUAL, KEEP = range(13, 19)
TOLERANCE = 19  # the relative residual it stops at: SOLVE_TOLERANCE unless its owner sets it
SLOTS = 20
# OUTCOME: still running, or stopped short (then the best iterate is the answer), or converged
# after a whole iteration (``lam``) or half of one (``lam + alpha y``)
RUNNING, CONVERGED, CONVERGED_HALF = 0.0, 1.0, 2.0

Vectors = wp.array(dtype=wp.vec3d)
Scalars = wp.array(dtype=wp.float64)
Blocks = wp.array(dtype=wp.mat33d)


def captured(device: wp.Device | str, launches: Callable[[], None]) -> object | None:
    """A graph of ``launches`` (recorded, not run), or None on a thread that runs beside
    others (``capture.side_by_side``): the caller launches them one by one there."""
    try:
        with graph_capture(device) as capture:
            launches()
    except CaptureOnWorker:
        return None
    return capture.graph


@wp.kernel
def _start_vectors(rhs: Vectors, b: Vectors, r: Vectors, shadow: Vectors, zeroed: wp.array2d(dtype=wp.vec3d)):
    i = wp.tid()
    b[i] = rhs[i]
    r[i] = rhs[i]
    shadow[i] = rhs[i]
    for k in range(zeroed.shape[0]):  # lam, best, p, v
        zeroed[k, i] = wp.vec3d()


@wp.kernel
def _start_scalars(s: Scalars):
    norm = wp.sqrt(s[BB])
    s[NORM] = norm
    s[RHO] = wp.float64(1.0)
    s[ALPHA] = wp.float64(1.0)
    s[OMEGA] = wp.float64(1.0)
    s[PRODUCTS] = wp.float64(0.0)
    s[BEST_AT] = wp.float64(0.0)
    s[BEST_RESIDUAL] = wp.float64(1.0)
    s[RESIDUAL] = wp.float64(0.0)
    s[KEEP] = wp.float64(0.0)
    s[ACTIVE] = wp.float64(1.0)
    s[OUTCOME] = wp.float64(RUNNING)
    if norm == wp.float64(0.0):  # the answer is zero, in no products
        s[ACTIVE] = wp.float64(0.0)
        s[OUTCOME] = wp.float64(CONVERGED)


@wp.func
def _block_dot(a: Vectors, b: Vectors, lane: int):
    # a . b over a launch of one block (every lane gets it): each lane adds every
    # block_dim-th term, a tile sums the lanes (on the CPU the block is one lane)
    total = wp.float64(0.0)
    for i in range(lane, a.shape[0], wp.block_dim()):
        total = total + wp.dot(a[i], b[i])
    return wp.tile_sum(wp.tile(total))[0]


@wp.func
def _converge(s: Scalars, slot: int, outcome: wp.float64):
    # whether |s| (or |r|), whose square is in ``slot``, is within the tolerance
    if s[ACTIVE] != wp.float64(0.0):
        norm = wp.sqrt(s[slot])
        if norm <= s[TOLERANCE] * s[NORM]:
            s[ACTIVE] = wp.float64(0.0)
            s[OUTCOME] = outcome
            s[RESIDUAL] = norm / s[NORM]


@wp.kernel
def _begin(
    s: Scalars,
    shadow: Vectors,
    r: Vectors,
    max_products: wp.float64,
    stall: wp.float64,
    running: wp.array(dtype=wp.int32),
):
    # rho_next = shadow . r, the loop's condition (also into ``running``, a captured graph's
    # branch), then rho and the direction's weight beta
    _, lane = wp.tid()
    rho_next = _block_dot(shadow, r, lane)
    if lane != 0:
        return
    s[RHO_NEXT] = rho_next
    running[0] = 0
    if s[ACTIVE] == wp.float64(0.0):
        return
    if s[PRODUCTS] >= max_products or s[PRODUCTS] - s[BEST_AT] >= stall or rho_next == wp.float64(0.0):
        s[ACTIVE] = wp.float64(0.0)
        return
    running[0] = 1
    s[BETA] = (rho_next / s[RHO]) * (s[ALPHA] / s[OMEGA])
    s[RHO] = rho_next


@wp.kernel
def _direction(
    s: Scalars, r: Vectors, v: Vectors, inverse: wp.array(dtype=wp.mat33d), p: Vectors, y: Vectors
):
    # the search direction p and its preconditioned y
    i = wp.tid()
    if s[ACTIVE] != wp.float64(0.0):
        p[i] = r[i] + s[BETA] * (p[i] - s[OMEGA] * v[i])
        y[i] = inverse[i] * p[i]


@wp.kernel
def _alpha(s: Scalars, shadow: Vectors, v: Vectors):
    _, lane = wp.tid()
    sv = _block_dot(shadow, v, lane)
    if lane == 0 and s[ACTIVE] != wp.float64(0.0):
        s[SV] = sv
        s[ALPHA] = s[RHO] / sv
        s[PRODUCTS] = s[PRODUCTS] + wp.float64(1.0)


@wp.kernel
def _half_step(s: Scalars, r: Vectors, v: Vectors, inverse: Blocks, s_vec: Vectors, z: Vectors):
    # the half step's residual s and its preconditioned z
    i = wp.tid()
    if s[ACTIVE] != wp.float64(0.0):
        s_vec[i] = r[i] - s[ALPHA] * v[i]
        z[i] = inverse[i] * s_vec[i]


@wp.kernel
def _half_converged(s: Scalars, s_vec: Vectors):
    _, lane = wp.tid()
    ss = _block_dot(s_vec, s_vec, lane)
    if lane == 0:
        s[SS] = ss
        _converge(s, SS, wp.float64(CONVERGED_HALF))


@wp.kernel
def _omega(s: Scalars, t: Vectors, s_vec: Vectors):
    _, lane = wp.tid()
    ts = _block_dot(t, s_vec, lane)
    tt = _block_dot(t, t, lane)
    if lane == 0 and s[ACTIVE] != wp.float64(0.0):
        s[TS] = ts
        s[TT] = tt
        s[PRODUCTS] = s[PRODUCTS] + wp.float64(1.0)
        s[OMEGA] = ts / tt


@wp.kernel
def _step(s: Scalars, y: Vectors, z: Vectors, s_vec: Vectors, t: Vectors, lam: Vectors, r: Vectors):
    i = wp.tid()
    if s[ACTIVE] != wp.float64(0.0):
        lam[i] = lam[i] + s[ALPHA] * y[i] + s[OMEGA] * z[i]
        r[i] = s_vec[i] - s[OMEGA] * t[i]


@wp.kernel
def _converged(s: Scalars, r: Vectors):
    _, lane = wp.tid()
    rr = _block_dot(r, r, lane)
    if lane == 0:
        s[RR] = rr
        _converge(s, RR, wp.float64(CONVERGED))


@wp.kernel
def _true_residual(s: Scalars, b: Vectors, product: Vectors, r: Vectors):
    i = wp.tid()
    if s[ACTIVE] != wp.float64(0.0):
        r[i] = b[i] - product[i]


@wp.kernel
def _judge_best(s: Scalars, r: Vectors):
    # the true residual r against the best so far (KEEP: whether it is the best), then
    # whether it is within the tolerance
    _, lane = wp.tid()
    rr = _block_dot(r, r, lane)
    if lane != 0:
        return
    s[RR] = rr
    s[KEEP] = wp.float64(0.0)
    if s[ACTIVE] != wp.float64(0.0):
        s[PRODUCTS] = s[PRODUCTS] + wp.float64(1.0)
        residual = wp.sqrt(rr) / s[NORM]
        if residual < s[BEST_RESIDUAL]:
            s[BEST_RESIDUAL] = residual
            s[BEST_AT] = s[PRODUCTS]
            s[KEEP] = wp.float64(1.0)
    _converge(s, RR, wp.float64(CONVERGED))


@wp.kernel
def _keep_best(s: Scalars, lam: Vectors, best: Vectors):
    i = wp.tid()
    if s[KEEP] != wp.float64(0.0):
        best[i] = lam[i]


@wp.kernel
def _finish(s: Scalars, y: Vectors, best: Vectors, lam: Vectors):
    # the answer into ``lam``: it, its half step, or the best iterate
    i = wp.tid()
    if s[OUTCOME] == wp.float64(CONVERGED_HALF):
        lam[i] = lam[i] + s[ALPHA] * y[i]
    elif s[OUTCOME] == wp.float64(RUNNING):
        lam[i] = best[i]


class DeviceBiCGStab:
    """``A lam = rhs`` by ``solve_adjoint``'s BiCGStab on the device: made by
    ``adjoint_device`` for one backward pass (and by tests), its :meth:`solve` called once a
    substep. ``apply(x, out)`` launches ``out = A x`` (float64 vectors, zero where nothing
    is solved for; it may write ``out`` whatever the solve's state); ``inverse``: the
    preconditioner's 3 x 3 blocks, which its owner refills between solves. ``graphs``:
    replay each batch of iterations as one captured graph. Its scalars' ``TOLERANCE`` slot
    holds the residual a solve stops at, SOLVE_TOLERANCE until its owner's kernels write
    another there before :meth:`start` (``adjoint_device``: ``solve_tolerance`` of the step)."""

    def __init__(self, apply: Callable[[wp.array, wp.array], None], inverse: wp.array, graphs: bool) -> None:
        self.apply, self.inverse = apply, inverse
        self.nodes, self.device = inverse.shape[0], inverse.device
        self.dots = Dots(self.nodes, SLOTS, self.device)
        self.scalars = self.dots.values
        self.scalars.fill_(SOLVE_TOLERANCE)  # the TOLERANCE slot's; the others are set by start
        self.zeroed = wp.zeros((4, self.nodes), dtype=wp.vec3d, device=self.device)
        self.lam, self.best, self.p, self.v = (self.zeroed[k] for k in range(4))
        self.b, self.r, self.shadow, self.s, self.t, self.y, self.z, self.tmp = (
            wp.zeros(self.nodes, dtype=wp.vec3d, device=self.device) for _ in range(8)
        )
        self.running = wp.zeros(1, dtype=wp.int32, device=self.device)
        self.graphs = graphs
        self.graph: object | None = None

    def _launch(self, kernel: wp.Kernel, *inputs: object, nodes: bool = True) -> None:
        wp.launch(kernel, dim=self.nodes if nodes else 1, inputs=[self.scalars, *inputs], device=self.device)

    def _reduce(self, kernel: wp.Kernel, *inputs: object) -> None:
        # a kernel of dot products and the scalars' updates that follow them: one block
        inputs = [self.scalars, *inputs]
        wp.launch_tiled(kernel, dim=1, inputs=inputs, block_dim=SOLVE_LANES, device=self.device)

    def start(self, rhs: wp.array) -> None:
        """Launch the solve's first state for ``rhs`` (copied): a part of :meth:`solve`, apart
        so that a caller's graph can hold it."""
        inputs = [rhs, self.b, self.r, self.shadow, self.zeroed]
        wp.launch(_start_vectors, dim=self.nodes, inputs=inputs, device=self.device)
        self.dots(self.b, self.b, BB)
        self._launch(_start_scalars, nodes=False)

    def _iteration(self, check: bool, branch: bool) -> None:
        """``solve_adjoint``'s loop condition and body; ``check``: its true-residual refresh
        too. ``branch``: the body a conditional node of the graph being captured, run only
        while the solve runs (else its kernels are no-ops but its products are not: a batch
        that went on past the stop took half its time for nothing, measured on an H100)."""
        f64 = wp.float64
        self._reduce(_begin, self.shadow, self.r, f64(SOLVE_MAX_ITERATIONS), f64(SOLVE_STALL), self.running)
        if branch:
            wp.capture_if(self.running, on_true=lambda: self._body(check))
        else:
            self._body(check)

    def _body(self, check: bool) -> None:
        self._launch(_direction, self.r, self.v, self.inverse, self.p, self.y)
        self.apply(self.y, self.v)
        self._reduce(_alpha, self.shadow, self.v)
        self._launch(_half_step, self.r, self.v, self.inverse, self.s, self.z)
        self._reduce(_half_converged, self.s)
        self.apply(self.z, self.t)
        self._reduce(_omega, self.t, self.s)
        self._launch(_step, self.y, self.z, self.s, self.t, self.lam, self.r)
        if check:
            self.apply(self.lam, self.tmp)
            self._launch(_true_residual, self.b, self.tmp, self.r)
            self._reduce(_judge_best, self.r)
            self._launch(_keep_best, self.lam, self.best)
        else:
            self._reduce(_converged, self.r)

    def _batch(self, branch: bool = False) -> None:
        for k in range(1, SOLVE_CHECK + 1):
            self._iteration(k == SOLVE_CHECK, branch)

    def run(self) -> tuple[wp.array, int, float]:
        """After :meth:`start`: iterate, reading the scalars back once a batch, to the end;
        the solution (this solver's ``lam``, valid until the next solve), the products taken
        and the residual, as ``solve_adjoint`` gives them; its FloatingPointError likewise."""
        if self.graphs and self.graph is None:
            self.graph = captured(self.device, lambda: self._batch(branch=True))
        # a batch takes at least two products an iteration while the solve runs
        for _ in range(SOLVE_MAX_ITERATIONS // (2 * SOLVE_CHECK) + 2):
            if self.graph is not None:
                wp.capture_launch(self.graph)
            else:
                self._batch()
            state = self.scalars.numpy()  # the one readback of a batch
            active, products, best_at = float(state[ACTIVE]), int(state[PRODUCTS]), int(state[BEST_AT])
            # the loop's condition where the batch ended, so that no batch is launched for nothing
            if not active or products >= SOLVE_MAX_ITERATIONS or products - best_at >= SOLVE_STALL:
                break
        residual = float(state[RESIDUAL])
        if state[OUTCOME] == RUNNING:
            residual = float(state[BEST_RESIDUAL])
            if residual > SOLVE_ACCEPT:
                raise not_converged(products, residual)
        wp.launch(
            _finish, dim=self.nodes, inputs=[self.scalars, self.y, self.best, self.lam], device=self.device
        )
        return self.lam, products, residual

    def solve(self, rhs: wp.array) -> tuple[wp.array, int, float]:
        """:meth:`start` and :meth:`run`."""
        self.start(rhs)
        return self.run()
