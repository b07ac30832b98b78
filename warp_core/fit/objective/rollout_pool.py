"""Where the rollouts of a set of points run: side by side on the CPU's cores, or two at a
time on a GPU, each simulator on its own stream; one after another otherwise. The numbers
are those of one rollout after another, bit for bit.

Warp's CPU kernels run without Python's lock, so two simulators of the same problem, each
with its own buffers and captured graphs, simulate at once: on a 2-core machine two
30 x 30 rollouts took 0.44 s together against 0.73 s one after the other. No graph is
captured on those threads (a capture records every thread's CPU work, ``warp_core.capture``):
a job that needs one, as a collision stage that grows its room for contacts does, runs again
alone once the others end.

On a GPU a model that runs no batches of its own (``Simulator.batch_width`` 0) leaves most of
the device idle: a 47k-tet soft body's frame is thousands of small launches. Simulators
issued in turn on their own streams from this thread overlap on the device: on an H100 two
such rollouts took 0.162 s together against 0.25 s one after the other, three 0.205 s
against 0.377 s. Each further simulator costs its build and first capture (about 0.5 s for
that body), so a fit takes one more, not two: the body's two-parameter fit took 3.36-3.65 s
with two, 3.88-4.15 s with three and 3.94-4.19 s with one; its three-region fit 4.63-4.68,
5.14-5.19 and 5.52-5.80 s (one H100, two runs each, the same values bit for bit).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import warp as wp

from ...capture import CaptureOnWorker, side_by_side

__all__ = [
    "GPU_LANES",
    "MAX_WORKERS",
    "RolloutPool",
    "cpu_cores",
    "cpu_workers",
    "gpu_lanes",
    "limit_cpu_threads",
]

# at most this many simulators per fit: each holds its own buffers and graphs
MAX_WORKERS = 8
# simulators a fit runs at once on a GPU (see the module docstring)
GPU_LANES = 2
# the most CPU threads this process's fits may use (None: every core it may run on)
_cpu_thread_limit: list[int | None] = [None]


def limit_cpu_threads(count: int | None) -> None:
    """Let the fits of this process run at most ``count`` simulations side by side on the
    CPU (a farm task's share of a worker's cores); None lifts the limit."""
    if count is not None and count < 1:
        raise ValueError(f"a thread limit must be at least 1, not {count}")
    _cpu_thread_limit[0] = count


def cpu_workers(sim: Any, rollouts: int) -> int:
    """How many simulators run the ``rollouts`` of one Jacobian at once: on the CPU, for a
    model whose simulators may run side by side (``Simulator.parallel_rollouts``: each keeps
    its own state), one per core this process may use, up to ``MAX_WORKERS`` and the limit
    of :func:`limit_cpu_threads`."""
    if not str(sim.device).startswith("cpu") or not sim.parallel_rollouts:
        return 1
    return max(1, min(rollouts, cpu_cores(), MAX_WORKERS))


def cpu_cores() -> int:
    """The cores this process may run simulations on side by side: those it may be scheduled
    on, no more than :func:`limit_cpu_threads` allows."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, _cpu_thread_limit[0] or cores))


class RolloutPool:
    """Simulators beside the objective's own, built on first use (``build`` makes one): on
    the CPU each warmed by one rollout before it runs beside the others on a thread, on a
    GPU each with its own stream."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._sims: list[Any] = []
        self._streams: list[Any] = []  # on a GPU: the main simulator's stream, then ``_sims``'

    def run(self, main: Any, jobs: list[Callable[[Any], np.ndarray]], workers: int) -> list[np.ndarray]:
        """``job(sim)`` for every job, on ``main`` and up to ``workers - 1`` more simulators;
        results in the jobs' order."""
        if workers <= 1 or len(jobs) <= 1:
            return [job(main) for job in jobs]
        results: list[np.ndarray | None] = [None] * len(jobs)
        while len(self._sims) < workers - 1:
            # a new simulator loads its kernels and captures its graphs alone, on its first job
            sim = self._build()
            self._sims.append(sim)
            k = next(i for i, r in enumerate(results) if r is None)
            results[k] = jobs[k](sim)
        pending = [k for k, r in enumerate(results) if r is None]
        sims = [main, *self._sims[: workers - 1]]
        with ThreadPoolExecutor(max_workers=len(sims)) as pool:
            for start in range(0, len(pending), len(sims)):
                batch = pending[start : start + len(sims)]
                futures = [pool.submit(_beside_others, jobs[k], sims[i]) for i, k in enumerate(batch)]
                wait(futures)  # every job of the batch ends before any runs again alone
                for i, (k, future) in enumerate(zip(batch, futures, strict=True)):
                    try:
                        results[k] = future.result()
                    except CaptureOnWorker:
                        results[k] = jobs[k](sims[i])  # its new graphs are captured alone
        return results  # type: ignore[return-value]

    def run_on_streams(self, main: Any, jobs: list[Callable[[Any], Any]], lanes: int) -> list[np.ndarray]:
        """``job(sim).numpy()`` for every job, ``lanes`` at a time on a GPU: each job's rollout
        is issued on its simulator's own stream without waiting (every stream waits for the
        work issued before on the device's current one, not for the others), then read once
        the current stream has waited for its stream; results in the jobs' order."""
        if lanes <= 1 or len(jobs) <= 1:
            return [job(main).numpy() for job in jobs]
        while len(self._sims) < lanes - 1:
            self._sims.append(self._build())
        while len(self._streams) < lanes:
            self._streams.append(wp.Stream(main.device))
        sims = [main, *self._sims[: lanes - 1]]
        results = []
        for start in range(0, len(jobs), lanes):
            issued = []
            try:
                for sim, stream, job in zip(sims, self._streams, jobs[start : start + lanes], strict=False):
                    with wp.ScopedStream(stream):
                        issued.append(job(sim))
            finally:
                # whatever follows on the current stream (the readings, or where a job raised,
                # the caller's next rollout of these simulators) comes after all they issued
                for stream in self._streams[:lanes]:
                    wp.wait_stream(stream)
            results += [rollout.numpy() for rollout in issued]
        return results


def _beside_others(job: Callable[[Any], np.ndarray], sim: Any) -> np.ndarray:
    with side_by_side():
        return job(sim)


def gpu_lanes(sim: Any, rollouts: int) -> int:
    """How many simulators run ``rollouts`` at once on a GPU (each on its own stream): up to
    ``GPU_LANES`` for a model whose rollouts may run so (``Simulator.stream_rollouts``), on a
    CUDA device with room for another simulator beside the ones it holds (1: one after
    another)."""
    device = wp.get_device(sim.device)
    if not device.is_cuda or not sim.stream_rollouts or rollouts < 2:
        return 1
    held = wp.get_mempool_used_mem_current(device) if wp.is_mempool_enabled(device) else 0
    if device.free_memory < 2 * held:
        return 1  # another simulator's buffers would crowd the device
    return min(rollouts, GPU_LANES)
