"""Where a refined binding may go: its own triangle, or across one of its edges into the
triangle on the other side, always on the surface it was bound to.

A binding is a triangle's three vertices and barycentric coordinates in it. Refinement is
Gauss-Newton on the two degrees of freedom of the coordinates (changes that keep their sum
1) within one triangle: each step minimizes the Gauss-Newton model over the triangle
(:func:`triangle_step`, exact: the model's minimum, else the best point of one of its three
edges), so the point never leaves it and the solution depends on the markers, not on the path
to it. Where the best point of a binding's triangle lies on an edge, the triangle across that
edge is tried too, if it belongs to the binding's domain (its home triangle and the triangles
sharing an edge with it), starting from the same point re-expressed there: its two
coordinates on the shared edge carry over and the third vertex gets 0
(:meth:`BindingDomain.across_edges`); the better of the two is kept. A binding whose vertices
are not a triangle of the mesh, or are one vertex three times (a hand-picked vertex), keeps its
own triangle only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["DIRECTIONS", "BindingDomain", "triangle_step"]

# the two directions a binding moves in (barycentric changes that keep the sum 1): a step
# ``a`` (2,) is the change ``a @ DIRECTIONS`` (3,)
DIRECTIONS = np.array([[-1.0, 1.0, 0.0], [-1.0, 0.0, 1.0]])
# a coordinate this close to 0 lies on the edge
_ON_EDGE = 1e-12


def _edge(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a <= b else (b, a)


class BindingDomain:
    """The triangles each binding may move in, and the moves that keep it there."""

    def __init__(self, home: np.ndarray, triangles: np.ndarray | None) -> None:
        """``home``: (T, 3) each binding's vertices as bound; ``triangles``: the mesh's (M, 3)
        triangles (None: every binding keeps its own triangle)."""
        self.home = np.asarray(home, dtype=np.int64).reshape(-1, 3)
        self._by_edge: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        self._by_vertex: dict[int, list[tuple[int, int, int]]] = {}
        for tri in np.asarray(triangles if triangles is not None else [], dtype=np.int64).reshape(-1, 3):
            t = (int(tri[0]), int(tri[1]), int(tri[2]))
            if len(set(t)) < 3:
                continue  # a degenerate triangle: nowhere to move in
            for a, b in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0])):
                self._by_edge.setdefault(_edge(a, b), []).append(t)
            for v in t:
                self._by_vertex.setdefault(v, []).append(t)
        self._allowed = [
            {frozenset(h), *map(frozenset, self.reach(k))} for k, h in enumerate(self.home.tolist())
        ]

    def reach(self, track: int) -> list[tuple[int, int, int]]:
        """The triangles binding ``track`` may cross into from its home triangle (those
        sharing an edge with it)."""
        h = self.home[track].tolist()
        out: list[tuple[int, int, int]] = []
        for a, b in ((h[0], h[1]), (h[1], h[2]), (h[2], h[0])):
            if a != b:
                out += [t for t in self._by_edge.get(_edge(a, b), []) if set(t) != set(h) and t not in out]
        return out

    def at_vertices(
        self, bindings: tuple[np.ndarray, np.ndarray], vertex: dict[int, int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``bindings`` (vertices, barycentrics) with binding k moved onto vertex ``vertex[k]``:
        in a triangle of the mesh around it, else the first corner of its own moved onto it."""
        vertices, bary = bindings[0].copy(), bindings[1].copy()
        for k, v in vertex.items():
            around = self._by_vertex.get(int(v))
            vertices[k] = around[0] if around else [v, *vertices[k][1:]]
            bary[k] = (vertices[k] == v).astype(np.float64) if around else [1.0, 0.0, 0.0]
        return vertices, bary

    def across(self, track: int, tri: tuple[int, int, int], a: int, b: int) -> tuple[int, int, int] | None:
        """The triangle of binding ``track``'s domain on the other side of edge (a, b) of
        ``tri``, or None (a wall: the mesh's border, or the domain's)."""
        here = frozenset(tri)
        for t in self._by_edge.get(_edge(a, b), []):
            if frozenset(t) != here and frozenset(t) in self._allowed[track]:
                return t
        return None

    def solve(
        self,
        start: tuple[np.ndarray, np.ndarray],
        which: np.ndarray,
        descend: Callable[[tuple[np.ndarray, np.ndarray], np.ndarray], tuple[np.ndarray, np.ndarray]],
        cost: Callable[[tuple[np.ndarray, np.ndarray]], np.ndarray],
    ) -> tuple[np.ndarray, np.ndarray]:
        """The bindings ``which`` re-solved from ``start`` (vertices, barycentrics):
        ``descend(bindings, mask)`` within each one's triangle, then, for those that end on an
        edge, again in the triangle across it (:meth:`across_edges`), keeping the one of lower
        ``cost(bindings)`` (T,)."""
        vertices, bary = descend(start, which)
        here = cost((vertices, bary))
        for mask, moved_vertices, moved_bary in self.across_edges(vertices, bary, which):
            there = descend((moved_vertices, moved_bary), mask)
            cost_there = cost(there)
            better = mask & (cost_there < here)
            vertices[better], bary[better], here[better] = (
                there[0][better],
                there[1][better],
                cost_there[better],
            )
        return vertices, bary

    def across_edges(
        self, vertices: np.ndarray, bary: np.ndarray, which: np.ndarray
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """For the bindings ``which`` that lie on an edge of their triangle (a coordinate 0)
        with a triangle of their domain across it: (mask, vertices, barycentrics) of each
        binding moved into that triangle, the same point re-expressed there. A binding at a
        corner lies on two edges: the first list entry holds one, the second the other."""
        slots: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for t in np.flatnonzero(which & (bary.min(axis=1) <= _ON_EDGE)):
            tri = tuple(int(v) for v in vertices[t])
            found = 0
            for i in np.flatnonzero(bary[t] <= _ON_EDGE).tolist():
                j, k = (i + 1) % 3, (i + 2) % 3
                other = self.across(t, tri, tri[j], tri[k]) if tri[j] != tri[k] else None
                if other is None:
                    continue
                if found == len(slots):
                    slots.append((np.zeros(len(bary), bool), vertices.copy(), bary.copy()))
                mask, slot_vertices, slot_bary = slots[found]
                weight = {tri[j]: bary[t, j], tri[k]: bary[t, k]}
                mask[t], slot_vertices[t] = True, other
                slot_bary[t] = [weight.get(v, 0.0) for v in other]
                found += 1
        return slots


def triangle_step(bary: np.ndarray, normal: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """(T, 2) the step along ``DIRECTIONS`` that minimizes each Gauss-Newton model
    ``0.5 a N a + g a`` (``normal`` (T, 2, 2), ``gradient`` (T, 2)) over its triangle
    (``bary + a @ DIRECTIONS >= 0``): the model's minimum where that lies inside, else the
    lowest of the best points of the three edges (a quadratic along each, clipped to it)."""
    step = -np.linalg.solve(normal, gradient[..., None])[..., 0]
    inside = (bary + step @ DIRECTIONS).min(axis=1) >= 0.0
    if inside.all():
        return step

    def model(a: np.ndarray) -> np.ndarray:
        return 0.5 * np.einsum("ti,tij,tj->t", a, normal, a) + np.einsum("ti,ti->t", gradient, a)

    corners = np.eye(3)
    best, best_value = step.copy(), np.full(len(bary), np.inf)
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        start = (corners[j] - bary)[:, 1:]  # the step to corner j, then along the edge to k
        along = np.broadcast_to((corners[k] - corners[j])[1:], start.shape)
        curvature = np.einsum("ti,tij,tj->t", along, normal, along)
        slope = np.einsum("ti,tij,tj->t", along, normal, start) + np.einsum("ti,ti->t", gradient, along)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.clip(np.where(curvature > 0.0, -slope / curvature, 0.0), 0.0, 1.0)
        a = start + t[:, None] * along
        value = model(a)
        better = value < best_value
        best[better], best_value[better] = a[better], value[better]
    return np.where(inside[:, None], step, best)
