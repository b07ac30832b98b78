"""Which member of a batch (``batch.py``) an element belongs to, in the kernels.

A batch lays its members' vertices, springs and hinges one after the other, ``per_member``
elements each. The kernels exist twice: for a batch, and for a single run, where every
element is member 0 as a compile-time constant (finding it at run time cost 7 % of a 12 x 12
sheet's rollout on the CPU). No ``from __future__ import annotations``: Warp reads the
functions' annotations.
"""

import functools

import warp as wp


@functools.cache
def member_functions(batched: bool):
    """(member_of(element, per_member), member_count(rows, rows_per_member)) for a batch or a
    single run."""

    @wp.func
    def member_of(element: int, per_member: int):
        m = int(0)  # noqa: UP018 (a dynamic Warp variable)
        if wp.static(batched):
            m = element // per_member
        return m

    @wp.func
    def member_count(rows: int, rows_per_member: int):
        n = int(1)  # noqa: UP018 (a dynamic Warp variable)
        if wp.static(batched):
            n = rows // rows_per_member
        return n

    return member_of, member_count
