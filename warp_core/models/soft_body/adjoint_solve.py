"""The soft-body adjoint's linear solve kept on its device (``adjoint_device``): the BiCGStab
of ``adjoint_step.solve_adjoint``, step for step and with its stopping rules, on float64
vectors (``wp.vec3d``) in Warp arrays.

Its scalars (rho, alpha, omega, the dot products, the products taken, the best residual and
whether the solve still runs) live in one small float64 device array that the kernels read
and write; every kernel of an iteration does nothing once the solve has stopped. The solve
runs :data:`SOLVE_CHECK` iterations at a time, where ``solve_adjoint`` checks its true
residual, in a loop whose condition a kernel writes after each batch (``wp.capture_while``):
captured, the whole solve is one graph that the host launches without reading anything
back, and what the owner must know (the most products, the worst residual, a solve that
failed) is kept in a tally on the device, read once after all its solves (with the fused
kernels, a gradient of a 47k-tet slab on an H100 went from 3.31-3.33 forward rollouts'
time to 2.94-2.95; it read the scalars back after every batch before). In a captured
batch each iteration's body is a conditional node (``wp.capture_if``) that runs only while
the solve does; launched one by one, the loop reads its condition after each batch and the
iterations past the stop run their kernels as no-ops and their products for nothing (wasted
work, not wrong numbers).

Dot products are reductions into that array (``adjoint_dots.Dots``). An iteration's kernels
over the same nodes are fused where the order of its arithmetic allows: the preconditioner
into the direction and into the half step, ``t . s`` with ``t . t``, the next iteration's rho
with the residual's norm, and alpha and omega taken by the kernels that use them; an H100
runs one of its small kernels in about 1.2 us, and an iteration besides its products went
from 38.3 to 32.5 us.
"""

from __future__ import annotations

from collections.abc import Callable

import warp as wp

from ...capture import CaptureOnWorker, graph_capture
from .adjoint_dots import Dots
from .adjoint_step import (
    SOLVE_ACCEPT,
    SOLVE_CHECK,
    SOLVE_MAX_ITERATIONS,
    SOLVE_STALL,
    SOLVE_TOLERANCE,
    not_converged,
)

__all__ = ["TOLERANCE", "DeviceBiCGStab", "captured"]

# the slots of the solve's scalars: its dot products first, then its state
RHO_NEXT, SV, SS, TS, TT, RR, BB = range(7)
RHO, ALPHA, OMEGA, BETA, NORM, PRODUCTS = range(7, 13)
BEST_AT, BEST_RESIDUAL, ACTIVE, OUTCOME, RESIDUAL, KEEP = range(13, 19)
TOLERANCE = 19  # the relative residual it stops at: SOLVE_TOLERANCE unless its owner sets it
SLOTS = 20
# the tally of the solves since :meth:`DeviceBiCGStab.reset_tally`; FAILED: the first solve
# that ended above SOLVE_ACCEPT, with its products and best residual
MOST_PRODUCTS, WORST_RESIDUAL, FAILED, FAILED_PRODUCTS, FAILED_RESIDUAL = range(5)
# OUTCOME: still running, or stopped short (then the best iterate is the answer), or converged
# after a whole iteration (``lam``) or half of one (``lam + alpha y``)
RUNNING, CONVERGED, CONVERGED_HALF = 0.0, 1.0, 2.0

Vectors = wp.array(dtype=wp.vec3d)
Scalars = wp.array(dtype=wp.float64)


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
def _start_scalars(s: Scalars, looping: wp.array(dtype=wp.int32)):
    looping[0] = 1
    norm = wp.sqrt(s[BB])
    s[NORM] = norm
    s[RHO_NEXT] = s[BB]  # the shadow residual is r: both are rhs
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
        looping[0] = 0


@wp.func
def _within_budget(s: Scalars, max_products: wp.float64, stall: wp.float64):
    # ``solve_adjoint``'s loop condition, but for the breakdown rho = 0
    return s[PRODUCTS] < max_products and s[PRODUCTS] - s[BEST_AT] < stall


@wp.kernel
def _begin(s: Scalars, max_products: wp.float64, stall: wp.float64, running: wp.array(dtype=wp.int32)):
    # the loop's condition (also into ``running``, a captured graph's branch), then rho and
    # the direction's weight beta
    running[0] = 0
    if s[ACTIVE] == wp.float64(0.0):
        return
    if not _within_budget(s, max_products, stall) or s[RHO_NEXT] == wp.float64(0.0):
        s[ACTIVE] = wp.float64(0.0)
        return
    running[0] = 1
    s[BETA] = (s[RHO_NEXT] / s[RHO]) * (s[ALPHA] / s[OMEGA])
    s[RHO] = s[RHO_NEXT]


@wp.func
def _kept(s: Scalars, slot: int, value: wp.float64, i: int):
    # a scalar every thread of a kernel divides for itself: the first keeps it in ``slot``
    # and counts the product it follows
    if i == 0:
        s[slot] = value
        s[PRODUCTS] = s[PRODUCTS] + wp.float64(1.0)
    return value


@wp.kernel
def _direction(
    s: Scalars, r: Vectors, v: Vectors, inverse: wp.array(dtype=wp.mat33d), p: Vectors, y: Vectors
):
    # the search direction p, and y preconditioned from it
    i = wp.tid()
    if s[ACTIVE] != wp.float64(0.0):
        p[i] = r[i] + s[BETA] * (p[i] - s[OMEGA] * v[i])
        y[i] = inverse[i] * p[i]


@wp.kernel
def _half_step(
    s: Scalars, r: Vectors, v: Vectors, inverse: wp.array(dtype=wp.mat33d), s_vec: Vectors, z: Vectors
):
    # alpha (each thread divides; the first keeps it and counts the product), the half
    # step's residual, and z preconditioned from it (unread where the half step converges)
    i = wp.tid()
    if s[ACTIVE] != wp.float64(0.0):
        alpha = _kept(s, ALPHA, s[RHO] / s[SV], i)
        s_vec[i] = r[i] - alpha * v[i]
        z[i] = inverse[i] * s_vec[i]


@wp.kernel
def _converged(s: Scalars, slot: int, outcome: wp.float64):
    # whether |s| (or |r|), whose square is in ``slot``, is within the tolerance
    if s[ACTIVE] != wp.float64(0.0):
        norm = wp.sqrt(s[slot])
        if norm <= s[TOLERANCE] * s[NORM]:
            s[ACTIVE] = wp.float64(0.0)
            s[OUTCOME] = outcome
            s[RESIDUAL] = norm / s[NORM]


@wp.kernel
def _step(s: Scalars, y: Vectors, z: Vectors, s_vec: Vectors, t: Vectors, lam: Vectors, r: Vectors):
    # omega (as alpha in ``_half_step``), then the iterate and its residual
    i = wp.tid()
    if s[ACTIVE] != wp.float64(0.0):
        omega = _kept(s, OMEGA, s[TS] / s[TT], i)
        lam[i] = lam[i] + s[ALPHA] * y[i] + omega * z[i]
        r[i] = s_vec[i] - omega * t[i]


@wp.kernel
def _true_residual(s: Scalars, b: Vectors, product: Vectors, r: Vectors):
    i = wp.tid()
    if s[ACTIVE] != wp.float64(0.0):
        r[i] = b[i] - product[i]


@wp.kernel
def _judge_best(s: Scalars):
    # the true residual (its square in RR) against the best so far
    if s[ACTIVE] != wp.float64(0.0):
        s[PRODUCTS] = s[PRODUCTS] + wp.float64(1.0)
        residual = wp.sqrt(s[RR]) / s[NORM]
        s[KEEP] = wp.float64(0.0)
        if residual < s[BEST_RESIDUAL]:
            s[BEST_RESIDUAL] = residual
            s[BEST_AT] = s[PRODUCTS]
            s[KEEP] = wp.float64(1.0)


@wp.kernel
def _keep_best(s: Scalars, lam: Vectors, best: Vectors):
    i = wp.tid()
    if s[ACTIVE] != wp.float64(0.0) and s[KEEP] != wp.float64(0.0):
        best[i] = lam[i]


@wp.kernel
def _end_batch(s: Scalars, max_products: wp.float64, stall: wp.float64, looping: wp.array(dtype=wp.int32)):
    # the loop's condition where a batch ended, so that no batch runs for nothing
    looping[0] = 0
    if s[ACTIVE] != wp.float64(0.0) and _within_budget(s, max_products, stall):
        looping[0] = 1


@wp.kernel
def _tally(s: Scalars, accept: wp.float64, tally: Scalars):
    # the solve's products and residual (its best iterate's where it stopped short) into the tally
    residual = s[RESIDUAL]
    if s[OUTCOME] == wp.float64(RUNNING):
        residual = s[BEST_RESIDUAL]
        if residual > accept and tally[FAILED] == wp.float64(0.0):
            tally[FAILED] = wp.float64(1.0)
            tally[FAILED_PRODUCTS] = s[PRODUCTS]
            tally[FAILED_RESIDUAL] = residual
    tally[MOST_PRODUCTS] = wp.max(tally[MOST_PRODUCTS], s[PRODUCTS])
    tally[WORST_RESIDUAL] = wp.max(tally[WORST_RESIDUAL], residual)


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
    replay the whole solve as one captured graph. Its scalars' ``TOLERANCE`` slot holds the
    residual a solve stops at, SOLVE_TOLERANCE until its owner's kernels write another there
    before :meth:`start` (``adjoint_device``: ``solve_tolerance`` of the step)."""

    def __init__(self, apply: Callable[[wp.array, wp.array], None], inverse: wp.array, graphs: bool) -> None:
        self.apply, self.inverse = apply, inverse
        self.nodes, self.device = inverse.shape[0], inverse.device
        self.dots = Dots(self.nodes, SLOTS, self.device)
        self.scalars = self.dots.values
        self.scalars.fill_(SOLVE_TOLERANCE)  # the TOLERANCE slot's; the others are set by start
        self.tally = wp.zeros(5, dtype=wp.float64, device=self.device)
        self.zeroed = wp.zeros((4, self.nodes), dtype=wp.vec3d, device=self.device)
        self.lam, self.best, self.p, self.v = (self.zeroed[k] for k in range(4))
        self.b, self.r, self.shadow, self.s, self.t, self.y, self.z, self.tmp = (
            wp.zeros(self.nodes, dtype=wp.vec3d, device=self.device) for _ in range(8)
        )
        self.running = wp.zeros(1, dtype=wp.int32, device=self.device)
        self.looping = wp.zeros(1, dtype=wp.int32, device=self.device)
        self.graphs = graphs
        self.graph: object | None = None

    def _launch(self, kernel: wp.Kernel, *inputs: object, nodes: bool = True) -> None:
        wp.launch(kernel, dim=self.nodes if nodes else 1, inputs=[self.scalars, *inputs], device=self.device)

    def start(self, rhs: wp.array) -> None:
        """Launch the solve's first state for ``rhs`` (copied): a part of :meth:`solve`, apart
        so that a caller's graph can hold it."""
        inputs = [rhs, self.b, self.r, self.shadow, self.zeroed]
        wp.launch(_start_vectors, dim=self.nodes, inputs=inputs, device=self.device)
        self.dots(self.b, self.b, BB)
        self._launch(_start_scalars, self.looping, nodes=False)

    def _iteration(self, check: bool, branch: bool) -> None:
        """``solve_adjoint``'s loop condition and body; ``check``: its true-residual refresh
        too. ``branch``: the body a conditional node of the graph being captured, run only
        while the solve runs (else its kernels are no-ops but its products are not: on an H100
        one gradient of a 47k-tet slab took 4.3 forward rollouts' time with the iterations past
        the stops run, 3.8 with them skipped). The node costs that H100 about 17 us an
        iteration; products that skip their work by reading a flag, with no node, measured
        the same (2.88-2.97 forward rollouts against 2.87), so the node stays."""
        f64 = wp.float64
        self._launch(_begin, f64(SOLVE_MAX_ITERATIONS), f64(SOLVE_STALL), self.running, nodes=False)
        if branch:
            wp.capture_if(self.running, on_true=lambda: self._body(check))
        else:
            self._body(check)

    def _body(self, check: bool) -> None:
        f64 = wp.float64
        self._launch(_direction, self.r, self.v, self.inverse, self.p, self.y)
        self.apply(self.y, self.v)
        self.dots(self.shadow, self.v, SV)
        self._launch(_half_step, self.r, self.v, self.inverse, self.s, self.z)
        self.dots(self.s, self.s, SS)
        self._launch(_converged, SS, f64(CONVERGED_HALF), nodes=False)
        self.apply(self.z, self.t)
        self.dots.pair(self.t, self.s, TS, self.t, TT)
        self._launch(_step, self.y, self.z, self.s, self.t, self.lam, self.r)
        if check:
            self.apply(self.lam, self.tmp)
            self._launch(_true_residual, self.b, self.tmp, self.r)
        self.dots.pair(self.r, self.r, RR, self.shadow, RHO_NEXT)  # with the next iteration's rho
        if check:
            self._launch(_judge_best, nodes=False)
            self._launch(_keep_best, self.lam, self.best)
        self._launch(_converged, RR, f64(CONVERGED), nodes=False)

    def _batch(self) -> None:
        branch = self.device.is_capturing
        for k in range(1, SOLVE_CHECK + 1):
            self._iteration(k == SOLVE_CHECK, branch)
        f64 = wp.float64
        self._launch(_end_batch, f64(SOLVE_MAX_ITERATIONS), f64(SOLVE_STALL), self.looping, nodes=False)

    def launches(self) -> None:
        """After :meth:`start`: launch the solve to its end, its answer into ``lam`` (valid
        until the next solve) and its products and residual into :attr:`tally`, reading
        nothing back where captured: a part of :meth:`solve`, apart so that a caller's graph
        can hold it."""
        wp.capture_while(self.looping, self._batch)
        wp.launch(
            _finish, dim=self.nodes, inputs=[self.scalars, self.y, self.best, self.lam], device=self.device
        )
        wp.launch(
            _tally, dim=1, inputs=[self.scalars, wp.float64(SOLVE_ACCEPT), self.tally], device=self.device
        )

    def reset_tally(self) -> None:
        self.tally.zero_()

    def read_tally(self) -> tuple[int, float]:
        """The most products and the worst residual of the solves since :meth:`reset_tally`;
        the FloatingPointError of ``solve_adjoint`` where one of them ended above
        SOLVE_ACCEPT (its products and best residual in the message)."""
        tally = self.tally.numpy()
        if tally[FAILED]:
            raise not_converged(int(tally[FAILED_PRODUCTS]), float(tally[FAILED_RESIDUAL]))
        return int(tally[MOST_PRODUCTS]), float(tally[WORST_RESIDUAL])

    def solve(self, rhs: wp.array) -> tuple[wp.array, int, float]:
        """The solution (this solver's ``lam``, valid until the next solve), the products taken
        and the residual, as ``solve_adjoint`` gives them; its FloatingPointError likewise."""
        self.reset_tally()
        self.start(rhs)
        if self.graphs and self.graph is None:
            self.graph = captured(self.device, self.launches)
        if self.graph is not None:
            wp.capture_launch(self.graph)
        else:
            self.launches()
        products, residual = self.read_tally()
        return self.lam, products, residual
