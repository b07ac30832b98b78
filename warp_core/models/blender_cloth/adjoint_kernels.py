"""Kernels of the adjoint: adding one substep's gradients into the running totals.

No ``from __future__ import annotations`` here: Warp reads the kernel argument types
from the closures, which string annotations would not capture.
"""

import warp as wp

_KERNELS: dict = {}


def accumulate_vec3_kernel(dtype):
    """dst += src for arrays of vec3 of ``dtype``."""
    key = ("vec", dtype)
    if key not in _KERNELS:
        vec3 = wp.types.vector(3, dtype)

        @wp.kernel(module="unique")
        def accumulate_vec3(src: wp.array(dtype=vec3), dst: wp.array(dtype=vec3)):
            i = wp.tid()
            dst[i] = dst[i] + src[i]

        _KERNELS[key] = accumulate_vec3
    return _KERNELS[key]


def accumulate_scalar_kernel(dtype):
    """dst += src for arrays of ``dtype``."""
    key = ("scalar", dtype)
    if key not in _KERNELS:

        @wp.kernel(module="unique")
        def accumulate_scalar(src: wp.array(dtype=dtype), dst: wp.array(dtype=dtype)):
            i = wp.tid()
            dst[i] = dst[i] + src[i]

        _KERNELS[key] = accumulate_scalar
    return _KERNELS[key]
