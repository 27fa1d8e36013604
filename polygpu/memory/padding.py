"""Shared-memory padding that minimises bank conflicts: the paper's Algorithm 2 (§5).

A shared buffer is row-major; padding its innermost extent by ``p`` elements changes the
distance, in memory, between the elements that consecutive threads of a warp touch.
For each candidate ``p`` in ``0 .. banks - 1`` every reference gets its *stride* (in
elements, between the elements of threads ``t`` and ``t + 1``), the stride gives the
*degree* of bank conflicts -- how many serialized requests the warp's access needs --
and the degree gives a cost ``t_start + t_request * degree``.  The padding with the
smallest total cost (weighted by how often each reference runs) wins; ties go to the
smallest padding (less shared memory).

The bank model of today's GPUs (32 banks of 4 bytes, a whole warp per request):

* 4-byte elements: threads ``t`` and ``t'`` hit the same bank when
  ``s (t - t') = 0 mod 32``, so ``gcd(s, 32)`` of the 32 threads share each bank and the
  access takes ``gcd(s, 32)`` requests.  A stride of 0 is a broadcast: 1 request.
* 8-byte elements: a warp's 256 bytes are served in two phases of 16 threads; within a
  phase an element covers two consecutive banks, so threads conflict when
  ``2 s (t - t') = 0 mod 32``, i.e. ``s (t - t') = 0 mod 16``: ``2 * gcd(s, 16)``
  requests in all (2 when conflict-free), 1 for a broadcast.

``tuning/bank_conflicts.py`` measured this model on an H100 (stride 0..32, both element
sizes): time per warp access = t_start + t_request * degree fits with R^2 > 0.9999
(``tuning/results/NVIDIA-H100-80GB-HBM3/bank_calibration.md``); ``CostModel.calibrated``
reads the fit.

The solver is a pure function of integers; where the extents, strides and weights come
from (the tile's data space and the thread mapping) is the memory stage's business.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from math import gcd, prod
from pathlib import Path

BANKS = 32
WARP = 32  # lanes of a warp: what one shared-memory request serves
DEFAULT_CALIBRATION = Path(__file__).with_name("bank_calibration.json")


@dataclass(frozen=True)
class SharedReference:
    """One reference to a shared buffer, as consecutive threads of a warp see it.

    ``steps[d]`` is how much the reference's subscript in dimension ``d`` grows from
    thread ``t`` to thread ``t + 1`` (e.g. ``(1, 0)`` for ``buf[tx][k]``: a column read
    by a warp); ``weight`` is how often it runs relative to the others.
    """

    name: str
    steps: tuple[int, ...]
    weight: int = 1


@dataclass(frozen=True)
class LaneReference:
    """A reference whose lanes do not step evenly: ``lanes[l]`` is the subscript offset
    (per buffer dimension) lane ``l`` of a warp reads, e.g. a tensor-core operand whose
    lane ``4 g + q`` reads row ``g``, step ``q`` (codegen/mma.py).  Its degree is counted
    bank by bank (:func:`lane_degree`)."""

    name: str
    lanes: tuple[tuple[int, ...], ...]
    weight: int = 1


@dataclass(frozen=True)
class CostModel:
    """``cost(degree) = t_start + t_request * degree`` (paper §5), in any time unit."""

    t_start: float = 1.0
    t_request: float = 1.0

    def cost(self, degree: int) -> float:
        return self.t_start + self.t_request * degree

    @staticmethod
    def calibrated(calibration: Path | str, element_size: int) -> CostModel:
        """The fit recorded by ``tuning/bank_conflicts.py`` for ``element_size`` bytes
        (``tuning/results/<gpu>/bank_calibration.json``)."""
        fit = json.loads(Path(calibration).read_text())["fit"][str(element_size)]
        return CostModel(fit["t_start"], fit["t_request"])

    @staticmethod
    def default(element_size: int) -> CostModel:
        """The calibration shipped with polygpu (a copy of the H100 fit; the tuning
        script refreshes it), or unit costs for element sizes it does not cover."""
        try:
            return CostModel.calibrated(DEFAULT_CALIBRATION, element_size)
        except (OSError, KeyError, ValueError):
            return CostModel()


@dataclass(frozen=True)
class PaddingDecision:
    padding: int
    cost: float
    degrees: dict[str, int]  # per reference, at the chosen padding
    costs: tuple[float, ...]  # total cost of every padding 0 .. banks - 1


def conflict_degree(stride: int, element_size: int, banks: int = BANKS) -> int:
    """Serialized requests for one warp access with element ``stride`` (see module doc)."""
    if element_size not in (4, 8):
        raise ValueError(f"element size {element_size}: the bank model covers 4 and 8 bytes")
    if stride == 0:
        return 1  # broadcast
    if element_size == 4:
        return gcd(stride, banks)
    return 2 * gcd(stride, banks // 2)


def lane_degree(extents: tuple[int, ...], padding: int, lanes: tuple[tuple[int, ...], ...],
                element_size: int, banks: int = BANKS) -> int:
    """Serialized requests of one warp access whose lanes read ``lanes`` (offsets per
    dimension, innermost extent padded by ``padding``), counted as the bank model of the
    module doc has it: per phase (a whole warp for 4-byte elements, half-warps for 8),
    the most distinct elements any bank serves; phases add up."""
    if element_size not in (4, 8):
        raise ValueError(f"element size {element_size}: the bank model covers 4 and 8 bytes")
    words = element_size // 4
    phase = banks // words
    degree = 0
    for first in range(0, len(lanes), phase):
        served: dict[int, set[int]] = {}
        for lane in lanes[first:first + phase]:
            offset = element_stride(extents, padding, lane)
            for w in range(words):
                served.setdefault((offset * words + w) % banks, set()).add(offset)
        degree += max(len(v) for v in served.values())
    return degree


def reference_degree(extents: tuple[int, ...], padding: int,
                     reference: SharedReference | LaneReference, element_size: int,
                     banks: int = BANKS) -> int:
    """The degree of either kind of reference at ``padding``."""
    if isinstance(reference, LaneReference):
        return lane_degree(extents, padding, reference.lanes, element_size, banks)
    return conflict_degree(element_stride(extents, padding, reference.steps), element_size,
                           banks)


def element_stride(extents: tuple[int, ...], padding: int, steps: tuple[int, ...]) -> int:
    """Distance in elements between consecutive threads' elements, innermost extent
    padded by ``padding``."""
    if len(extents) != len(steps):
        raise ValueError(f"{len(steps)} steps for a {len(extents)}-dimensional buffer")
    padded = extents[:-1] + (extents[-1] + padding,)
    return sum(step * prod(padded[d + 1:]) for d, step in enumerate(steps))


def choose_padding(
    extents: tuple[int, ...],
    references: tuple[SharedReference | LaneReference, ...],
    element_size: int,
    model: CostModel = CostModel(),
    banks: int = BANKS,
    multiple: int = 1,
) -> PaddingDecision:
    """Algorithm 2: the padding of the innermost extent with the least total cost,
    among the multiples of ``multiple`` (rows that must stay aligned for vector loads:
    4 floats are 16 bytes)."""
    costs = []
    for p in range(banks):
        costs.append(sum(
            r.weight * model.cost(reference_degree(extents, p, r, element_size, banks))
            for r in references))
    best = min(range(0, banks, multiple), key=lambda p: (costs[p], p))
    degrees = {r.name: reference_degree(extents, best, r, element_size, banks)
               for r in references}
    return PaddingDecision(best, costs[best], degrees, tuple(costs))
