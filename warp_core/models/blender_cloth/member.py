"""Which member of a batch (``batch.py``) an element belongs to, in the kernels.

A batch lays its members' vertices, springs and hinges one after the other, ``per_member``
elements each; a single run is one member. No ``from __future__ import annotations``: Warp
reads the function's annotations.
"""

import warp as wp


@wp.func
def member_of(element: int, per_member: int, total: int):
    # a single run skips the division (its every element is member 0)
    m = int(0)  # noqa: UP018 (a dynamic Warp variable)
    if per_member < total:
        m = element // per_member
    return m
