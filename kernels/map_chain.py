"""map_chain: seed 003's chain F = ||A B c|| (D E + D) over ni instances, one loop nest
per elementary function joined by local arrays (kernels/map_chain.c): the ``fused
batch`` candidate runs every nest of an instance in one group of threads, the
intermediates contracted into shared memory."""

from __future__ import annotations

import math

from polygpu import affine, f32, local


@affine
def map_chain(ni: int, A: f32[ni, 3, 3], B: f32[ni, 3, 3], c: f32[ni, 3],
              D: f32[ni, 5, 5], E: f32[ni, 5, 5], F: f32[ni, 5, 5]):
    M1 = local(f32[ni, 3, 3])
    v1 = local(f32[ni, 3])
    s1 = local(f32[ni])
    M2 = local(f32[ni, 5, 5])
    M3 = local(f32[ni, 5, 5])
    for e in range(ni):
        for i in range(3):
            for j in range(3):
                M1[e, i, j] = 0.0
                for k in range(3):
                    M1[e, i, j] += A[e, i, k] * B[e, k, j]
    for e in range(ni):
        for i in range(3):
            v1[e, i] = 0.0
            for k in range(3):
                v1[e, i] += M1[e, i, k] * c[e, k]
    for e in range(ni):
        s1[e] = 0.0
        for i in range(3):
            s1[e] += v1[e, i] * v1[e, i]
        s1[e] = math.sqrt(s1[e])
    for e in range(ni):
        for i in range(5):
            for j in range(5):
                M2[e, i, j] = 0.0
                for k in range(5):
                    M2[e, i, j] += D[e, i, k] * E[e, k, j]
    for e in range(ni):
        for i in range(5):
            for j in range(5):
                M3[e, i, j] = M2[e, i, j] + D[e, i, j]
    for e in range(ni):
        for i in range(5):
            for j in range(5):
                F[e, i, j] = M3[e, i, j] * s1[e]
