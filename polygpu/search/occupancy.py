"""What a kernel costs a streaming multiprocessor, from nvcc's own report, without a GPU.

The search (paper §6) prunes variants whose occupancy -- resident warps per SM over the
maximum -- is too low.  The inputs are exact, not estimated: ``ptxas -v`` reports each
kernel's registers per thread, static shared memory, stack and spills for the target
architecture, and the launch plan gives threads per block and dynamic shared memory.
The arithmetic is the CUDA occupancy calculator's: registers are allocated per warp in
units of 256, shared memory per block in units of 128 bytes plus 1 KB the runtime
reserves, and the number of resident blocks is the minimum over the four limits
(threads, blocks, registers, shared memory).

Limits default to sm_90 (H100); :func:`limits_from_device` reads the real ones when a
GPU is present.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from polygpu.errors import PolygpuError


@dataclass(frozen=True)
class Limits:
    """Per-SM and per-block limits of a target."""

    arch: str = "sm_90"
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_unit: int = 256  # registers are allocated per warp in units of this
    shared_per_sm: int = 228 * 1024
    shared_per_block: int = 227 * 1024  # opt-in maximum
    shared_unit: int = 128
    shared_reserved_per_block: int = 1024  # taken by the runtime from every block
    warp_size: int = 32
    multiprocessors: int = 132  # SMs of the device (H100 SXM's by default)
    # peak rates for the search's cost order (tuner.predicted_cost)
    fp32_lanes_per_sm: int = 128  # FP32 instructions issued per SM and clock (x32 lanes)
    clock_hz: float = 1.755e9  # boost clock
    dram_bytes_per_s: float = 3.0e12  # achievable copy bandwidth (HBM3 H100: ~3 TB/s)
    l2_bytes: int = 50 * 2**20  # the L2 cache (H100 SXM and H200: 50 MB)
    l1_bytes: int = 256 * 1024  # an SM's L1 and shared memory together (Hopper: 256 kB)
    # the rate at which threads' own global loads and stores, each a word apart from the
    # neighbouring thread's, move through L2 when L1 cannot keep what they reuse (memory/
    # self_reuse.py): the interleaved batched Cholesky's thread per element at n = 8 on
    # the H100 (2026-12-07, two schedules in float and double, 1.5 GB) moved its 5.8-6.5
    # GB of such accesses at 4.36-4.73 TB/s
    l2_access_bytes_per_s: float = 4.4e12
    # global memory (the H100 SXM's 80 GB): what a plan's scratch arrays must fit beside
    # the caller's (a relayout's twins double them)
    memory_bytes: int = 80 * 10**9


SM_90 = Limits()


@dataclass(frozen=True)
class Resources:
    """ptxas' report for one kernel."""

    kernel: str
    registers: int
    shared_static: int  # bytes
    stack: int  # bytes of stack frame per thread
    spill_stores: int
    spill_loads: int
    barriers: int


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    fraction: float  # resident warps / maximum warps per SM
    limited_by: str  # 'threads' | 'blocks' | 'registers' | 'shared memory' | 'launch'


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(threads_per_block: int, registers: int, shared_bytes: int,
              limits: Limits = SM_90) -> Occupancy:
    """Resident blocks and warps per SM for a block of ``threads_per_block`` threads,
    ``registers`` per thread and ``shared_bytes`` of shared memory (static + dynamic)."""
    if not 1 <= threads_per_block <= 1024 or registers > limits.max_registers_per_thread \
            or shared_bytes > limits.shared_per_block:
        return Occupancy(0, 0, 0.0, "launch")
    warps = -(-threads_per_block // limits.warp_size)
    max_warps = limits.max_threads_per_sm // limits.warp_size
    bounds = {
        "threads": max_warps // warps,
        "blocks": limits.max_blocks_per_sm,
    }
    if registers > 0:
        per_warp = _round_up(registers * limits.warp_size, limits.register_unit)
        bounds["registers"] = (limits.registers_per_sm // per_warp) // warps
    per_block = _round_up(shared_bytes, limits.shared_unit) + limits.shared_reserved_per_block
    bounds["shared memory"] = limits.shared_per_sm // per_block
    limited_by = min(bounds, key=lambda k: (bounds[k], list(bounds).index(k)))
    blocks = bounds[limited_by]
    if blocks == 0:
        return Occupancy(0, 0, 0.0, limited_by)
    return Occupancy(blocks, blocks * warps, blocks * warps / max_warps, limited_by)


_FUNCTION = re.compile(r"Compiling entry function '(?P<name>[^']+)'")
_PROPERTIES = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, "
                    r"(?P<loads>\d+) bytes spill loads")
_USED = re.compile(r"Used (?P<regs>\d+) registers(?:, used (?P<bars>\d+) barriers)?"
                   r"(?:, (?P<cstack>\d+) bytes cumulative stack size)?"
                   r"(?:, (?P<smem>\d+) bytes smem)?")


def parse_ptxas(report: str) -> dict[str, Resources]:
    """Per kernel, the resources in ``ptxas -v`` output.  A split kernel's halves
    (``KERNEL_whole`` and ``KERNEL_partial``, ``__noinline__`` device functions:
    codegen/full_tiles.py) are reported apart, after the kernel, and only with their
    frames: their stack and spills count as the kernel's (its registers already cover
    its calls)."""
    result: dict[str, Resources] = {}
    name = None
    frame = (0, 0, 0)
    halves: list[tuple[str, tuple[int, int, int]]] = []
    callee = None
    for line in report.splitlines():
        m = _FUNCTION.search(line)
        if m:
            name, frame, callee = m["name"], (0, 0, 0), None
            continue
        m = _PROPERTIES.search(line)
        if m and name is None:
            callee = m["name"]
            continue
        m = _FRAME.search(line)
        if m and name:
            frame = (int(m["stack"]), int(m["stores"]), int(m["loads"]))
            continue
        if m and callee:
            halves.append((callee, (int(m["stack"]), int(m["stores"]), int(m["loads"]))))
            callee = None
            continue
        m = _USED.search(line)
        if m and name:
            result[name] = Resources(name, int(m["regs"]), int(m["smem"] or 0), frame[0],
                                     frame[1], frame[2], int(m["bars"] or 0))
            name = None
    for callee, (stack, stores, loads) in halves:
        for kernel, r in result.items():
            if f"{kernel}_whole" in callee or f"{kernel}_partial" in callee:
                result[kernel] = replace(r, stack=r.stack + stack,
                                         spill_stores=r.spill_stores + stores,
                                         spill_loads=r.spill_loads + loads)
    return result


def resource_usage(cuda_source: str, arch: str = "sm_90") -> dict[str, Resources]:
    """Compile ``cuda_source`` with nvcc for ``arch`` (no GPU needed) and return ptxas'
    report per ``__global__`` kernel (C linkage names, as in the source)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise PolygpuError("nvcc not found on PATH: it is needed for register and "
                           "shared-memory usage")
    source = re.sub(r'(?<!extern "C" )\b__global__\b', 'extern "C" __global__', cuda_source)
    with tempfile.TemporaryDirectory(prefix="polygpu-ptxas-") as tmp:
        cu = Path(tmp) / "kernels.cu"
        cu.write_text(source)
        out = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o",
                              str(Path(tmp) / "kernels.cubin"), str(cu)],
                             capture_output=True, text=True)
    if out.returncode != 0:
        raise PolygpuError(f"nvcc could not compile the program for {arch}:\n"
                           + "\n".join(out.stderr.splitlines()[:10]))
    return parse_ptxas(out.stderr)


def limits_from_device(index: int = 0) -> Limits:
    """The limits of CUDA device ``index`` (through the device layer, in its primary
    context), or sm_90's without one."""
    from polygpu.runtime.device import GpuDevice, GpuUnavailableError

    device = GpuDevice(index)
    try:
        cuda = device.open()
    except GpuUnavailableError:  # no PyCUDA, no driver or no device
        return SM_90
    dev = cuda.Device(index)
    a = cuda.device_attribute
    major, minor = dev.compute_capability()
    # theoretical DRAM bandwidth (double data rate), of which copies reach about 90 %
    peak = 2 * dev.get_attribute(a.MEMORY_CLOCK_RATE) * 1e3 * \
        dev.get_attribute(a.GLOBAL_MEMORY_BUS_WIDTH) / 8
    return Limits(
        arch=f"sm_{major}{minor}",
        max_threads_per_sm=dev.get_attribute(a.MAX_THREADS_PER_MULTIPROCESSOR),
        max_blocks_per_sm=dev.get_attribute(a.MAX_BLOCKS_PER_MULTIPROCESSOR),
        registers_per_sm=dev.get_attribute(a.MAX_REGISTERS_PER_MULTIPROCESSOR),
        shared_per_sm=dev.get_attribute(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        shared_per_block=dev.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        shared_reserved_per_block=dev.get_attribute(a.RESERVED_SHARED_MEMORY_PER_BLOCK),
        warp_size=dev.get_attribute(a.WARP_SIZE),
        multiprocessors=dev.get_attribute(a.MULTIPROCESSOR_COUNT),
        fp32_lanes_per_sm=64 if (major, minor) == (8, 0) else 128,
        clock_hz=dev.get_attribute(a.CLOCK_RATE) * 1e3,
        dram_bytes_per_s=0.9 * peak if peak > 0 else SM_90.dram_bytes_per_s,
        memory_bytes=dev.total_memory(),
    )


def device_limits(timeout_s: float = 120.0, index: int = 0) -> Limits:
    """:func:`limits_from_device` asked of a child process, so the caller (the search)
    never holds a CUDA context of its own; sm_90's limits if the child cannot tell."""
    code = ("import dataclasses, json; from polygpu.search.occupancy import "
            f"limits_from_device as f; print(json.dumps(dataclasses.asdict(f({int(index)}))))")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=timeout_s)
        return Limits(**json.loads(out.stdout.strip().splitlines()[-1]))
    except (subprocess.SubprocessError, ValueError, IndexError, TypeError):
        return SM_90
