"""How far can mm's code shape go with vector loads and a cp.async pipeline?  A probe of
hand-written kernels, not polygpu's output: it answers whether the code generator's next
steps (16-byte global loads, multi-stage asynchronous copies) are worth building before
anyone builds them.

All kernels are the shape polygpu's best mm variant has (``tile=128,256 threads=16,16
jam=True time_tile=8 unroll=8 chunk=4``: 8 x 16 points a thread in runs of 4, ``a``'s
tile stored transposed so both operands load as ``float4`` from shared memory); they
differ only in how a tile reaches shared memory:

* ``scalar``: what polygpu generates today -- the next tile loaded word by word into
  registers during the current one, stored after it (double-buffered);
* ``vector``: the same with 16-byte global loads (and 16-byte shared stores of ``b``);
  ``vector16`` with tiles 16 deep (half the barriers, twice the shared memory);
* ``async<S>``: ``S`` shared stages filled by ``cp.async`` (16 bytes for ``b``, 4 for
  ``a``'s transposed tile), one barrier a tile, ``S - 1`` tiles in flight.

Every kernel's result is compared with cuBLAS's (``cupy.cublas.gemm``, beta = 1) first; the
times are CUDA events around each kernel alone, median of ``--repeats`` after 3 warm-ups,
with cuBLAS SGEMM timed the same way in the same run.

    python tuning/mm_pipeline_probe.py --sizes 2048,4096,8192 -o probe.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys

BM, BN, BK = 128, 256, 8

SOURCE = r"""
#define BM 128
#define BN 256
#define BK 8
#define PAD 4

__device__ __forceinline__ void cp4(void *smem, const void *gmem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp16(void *smem, const void *gmem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

// thread (tx, ty): rows 4 ty + {0..3} and 64 + 4 ty + {0..3}, columns 4 tx + 64 m + {0..3}
__device__ __forceinline__ void load_c(float acc[8][16], const float *c, int n, int row0,
                                       int col0, int tx, int ty) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float *p = c + (size_t)(row0 + (i / 4) * 64 + 4 * ty + i % 4) * n + col0 + 4 * tx;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      float4 v = *reinterpret_cast<const float4 *>(p + 64 * m);
      acc[i][4 * m] = v.x; acc[i][4 * m + 1] = v.y; acc[i][4 * m + 2] = v.z;
      acc[i][4 * m + 3] = v.w;
    }
  }
}

__device__ __forceinline__ void store_c(float acc[8][16], float *c, int n, int row0,
                                        int col0, int tx, int ty) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float *p = c + (size_t)(row0 + (i / 4) * 64 + 4 * ty + i % 4) * n + col0 + 4 * tx;
#pragma unroll
    for (int m = 0; m < 4; ++m)
      *reinterpret_cast<float4 *>(p + 64 * m) = make_float4(
          acc[i][4 * m], acc[i][4 * m + 1], acc[i][4 * m + 2], acc[i][4 * m + 3]);
  }
}

template <int K = BK>
__device__ __forceinline__ void compute(float acc[8][16], const float (*as)[BM + PAD],
                                        const float (*bs)[BN], int tx, int ty) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    float av[8], bv[16];
    *reinterpret_cast<float4 *>(av) = *reinterpret_cast<const float4 *>(&as[k][4 * ty]);
    *reinterpret_cast<float4 *>(av + 4) =
        *reinterpret_cast<const float4 *>(&as[k][64 + 4 * ty]);
#pragma unroll
    for (int m = 0; m < 4; ++m)
      *reinterpret_cast<float4 *>(bv + 4 * m) =
          *reinterpret_cast<const float4 *>(&bs[k][4 * tx + 64 * m]);
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 16; ++j) acc[i][j] += av[i] * bv[j];
  }
}

// the next tile word by word into registers during the current one (polygpu today)
extern "C" __global__ void __launch_bounds__(256)
mm_scalar(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c,
          int n) {
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  __shared__ __align__(16) float as[2][BK][BM + PAD];
  __shared__ __align__(16) float bs[2][BK][BN];
  float acc[8][16];
  load_c(acc, c, n, row0, col0, tx, ty);
  float pa[4], pb[8];
  const int tiles = n / BK;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    int i = tid + 256 * q;
    pa[q] = a[(size_t)(row0 + i / 8) * n + i % 8];
  }
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    int i = tid + 256 * q;
    pb[q] = b[(size_t)(i / 256) * n + col0 + i % 256];
  }
  int st = 0;
  for (int t = 0; t < tiles; ++t) {
#pragma unroll
    for (int q = 0; q < 4; ++q) { int i = tid + 256 * q; as[st][i % 8][i / 8] = pa[q]; }
#pragma unroll
    for (int q = 0; q < 8; ++q) { int i = tid + 256 * q; bs[st][i / 256][i % 256] = pb[q]; }
    __syncthreads();
    if (t + 1 < tiles) {
      const int k0 = (t + 1) * BK;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        int i = tid + 256 * q;
        pa[q] = a[(size_t)(row0 + i / 8) * n + k0 + i % 8];
      }
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        int i = tid + 256 * q;
        pb[q] = b[(size_t)(k0 + i / 256) * n + col0 + i % 256];
      }
    }
    compute(acc, as[st], bs[st], tx, ty);
    st ^= 1;
  }
  store_c(acc, c, n, row0, col0, tx, ty);
}

// the same with 16-byte loads: a's row segment of 4 (stored transposed, 4 words), b's
// 4-wide runs (one 16-byte store)
extern "C" __global__ void __launch_bounds__(256)
mm_vector(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c,
          int n) {
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  __shared__ __align__(16) float as[2][BK][BM + PAD];
  __shared__ __align__(16) float bs[2][BK][BN];
  float acc[8][16];
  load_c(acc, c, n, row0, col0, tx, ty);
  const int ar = tid / 2, ac = (tid % 2) * 4, br = tid / 64, bc = (tid % 64) * 4;
  const float *ap = a + (size_t)(row0 + ar) * n + ac;
  const float *bp = b + (size_t)br * n + col0 + bc;
  const int tiles = n / BK;
  float4 pa = *reinterpret_cast<const float4 *>(ap);
  float4 pb0 = *reinterpret_cast<const float4 *>(bp);
  float4 pb1 = *reinterpret_cast<const float4 *>(bp + (size_t)4 * n);
  int st = 0;
  for (int t = 0; t < tiles; ++t) {
    as[st][ac][ar] = pa.x; as[st][ac + 1][ar] = pa.y;
    as[st][ac + 2][ar] = pa.z; as[st][ac + 3][ar] = pa.w;
    *reinterpret_cast<float4 *>(&bs[st][br][bc]) = pb0;
    *reinterpret_cast<float4 *>(&bs[st][br + 4][bc]) = pb1;
    __syncthreads();
    if (t + 1 < tiles) {
      const size_t k0 = (size_t)(t + 1) * BK;
      pa = *reinterpret_cast<const float4 *>(ap + k0);
      pb0 = *reinterpret_cast<const float4 *>(bp + k0 * n);
      pb1 = *reinterpret_cast<const float4 *>(bp + (k0 + 4) * n);
    }
    compute(acc, as[st], bs[st], tx, ty);
    st ^= 1;
  }
  store_c(acc, c, n, row0, col0, tx, ty);
}

// mm_vector with K-deep tiles in dynamic shared memory (two buffers)
template <int K>
__device__ __forceinline__ void mm_vector_deep(const float *__restrict__ a,
                                               const float *__restrict__ b,
                                               float *__restrict__ c, int n) {
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  extern __shared__ __align__(16) float dyn[];
  float (*as)[K][BM + PAD] = reinterpret_cast<float (*)[K][BM + PAD]>(dyn);
  float (*bs)[K][BN] = reinterpret_cast<float (*)[K][BN]>(dyn + 2 * K * (BM + PAD));
  float acc[8][16];
  load_c(acc, c, n, row0, col0, tx, ty);
  constexpr int QA = K / 8, QB = K / 4;  // float4s a thread loads of a's, b's tile
  float4 pa[QA], pb[QB];
  const int tiles = n / K;
  auto load = [&](int t) {
    const size_t k0 = (size_t)t * K;
#pragma unroll
    for (int q = 0; q < QA; ++q) {
      const int i = tid + 256 * q;
      pa[q] = *reinterpret_cast<const float4 *>(
          a + (size_t)(row0 + i / (K / 4)) * n + k0 + (i % (K / 4)) * 4);
    }
#pragma unroll
    for (int q = 0; q < QB; ++q) {
      const int i = tid + 256 * q;
      pb[q] = *reinterpret_cast<const float4 *>(b + (k0 + i / 64) * n + col0 + (i % 64) * 4);
    }
  };
  load(0);
  int st = 0;
  for (int t = 0; t < tiles; ++t) {
#pragma unroll
    for (int q = 0; q < QA; ++q) {
      const int i = tid + 256 * q, r = i / (K / 4), c4 = (i % (K / 4)) * 4;
      as[st][c4][r] = pa[q].x; as[st][c4 + 1][r] = pa[q].y;
      as[st][c4 + 2][r] = pa[q].z; as[st][c4 + 3][r] = pa[q].w;
    }
#pragma unroll
    for (int q = 0; q < QB; ++q) {
      const int i = tid + 256 * q;
      *reinterpret_cast<float4 *>(&bs[st][i / 64][(i % 64) * 4]) = pb[q];
    }
    __syncthreads();
    if (t + 1 < tiles) load(t + 1);
    compute<K>(acc, as[st], bs[st], tx, ty);
    st ^= 1;
  }
  store_c(acc, c, n, row0, col0, tx, ty);
}

extern "C" __global__ void __launch_bounds__(256)
mm_vector16(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c,
            int n) { mm_vector_deep<16>(a, b, c, n); }

// S stages filled by cp.async, S - 1 tiles in flight, one barrier a tile
template <int S>
__device__ __forceinline__ void mm_async(const float *__restrict__ a,
                                         const float *__restrict__ b,
                                         float *__restrict__ c, int n) {
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  extern __shared__ __align__(16) float dyn[];
  float (*as)[BK][BM + PAD] = reinterpret_cast<float (*)[BK][BM + PAD]>(dyn);
  float (*bs)[BK][BN] = reinterpret_cast<float (*)[BK][BN]>(dyn + S * BK * (BM + PAD));
  float acc[8][16];
  load_c(acc, c, n, row0, col0, tx, ty);
  const int ar = tid / 2, ac = (tid % 2) * 4, br = tid / 64, bc = (tid % 64) * 4;
  const float *ap = a + (size_t)(row0 + ar) * n + ac;
  const float *bp = b + (size_t)br * n + col0 + bc;
  const int tiles = n / BK;
  auto issue = [&](int t) {
    const int s = t % S;
    const size_t k0 = (size_t)t * BK;
#pragma unroll
    for (int e = 0; e < 4; ++e) cp4(&as[s][ac + e][ar], ap + k0 + e);
    cp16(&bs[s][br][bc], bp + k0 * n);
    cp16(&bs[s][br + 4][bc], bp + (k0 + 4) * n);
  };
#pragma unroll
  for (int t = 0; t < S - 1; ++t) {
    if (t < tiles) issue(t);
    commit();
  }
  for (int t = 0; t < tiles; ++t) {
    wait_groups<S - 2>();  // tile t is in (this thread's part)
    __syncthreads();       // every part is in; stage (t - 1) % S is read by nobody
    if (t + S - 1 < tiles) issue(t + S - 1);
    commit();
    compute(acc, as[t % S], bs[t % S], tx, ty);
  }
  store_c(acc, c, n, row0, col0, tx, ty);
}

extern "C" __global__ void __launch_bounds__(256)
mm_async3(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c,
          int n) { mm_async<3>(a, b, c, n); }
extern "C" __global__ void __launch_bounds__(256)
mm_async4(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c,
          int n) { mm_async<4>(a, b, c, n); }
"""

# name -> (stages, tile depth) of its dynamic shared memory (None: static)
KERNELS = {"scalar": None, "vector": None, "vector16": (2, 16), "async3": (3, BK),
           "async4": (4, BK)}


def shared_bytes(layout) -> int:
    if layout is None:
        return 0
    stages, depth = layout
    return stages * depth * ((BM + 4) + BN) * 4


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="2048,4096,8192")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("-o", "--output")
    args = p.parse_args(argv)

    import cupy as cp
    import cupy.cublas  # noqa: F401  (cp.cublas.gemm: SGEMM with beta = 1)

    cp.cuda.set_pinned_memory_allocator(None)
    module = cp.RawModule(code=SOURCE, options=("-std=c++17",), backend="nvcc")
    device = cp.cuda.Device()
    name = cp.cuda.runtime.getDeviceProperties(device.id)["name"].decode()

    def timed(run, repeats):
        for _ in range(3):
            run()
        times = []
        for _ in range(repeats):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end))
        return statistics.median(times)

    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rng = cp.random.default_rng(7)
        a = rng.random((n, n), dtype=cp.float32) + 0.5
        b = rng.random((n, n), dtype=cp.float32) + 0.5
        c0 = rng.random((n, n), dtype=cp.float32) + 0.5
        # cuBLAS SGEMM c := a b + c, as the kernels compute (beta = 1)
        expected = c0.copy()
        cp.cublas.gemm("N", "N", a, b, out=expected, alpha=1.0, beta=1.0)
        out = c0.copy()
        cublas_ms = timed(lambda out=out, a=a, b=b: cp.cublas.gemm(
            "N", "N", a, b, out=out, alpha=1.0, beta=1.0), args.repeats)
        flops = 2.0 * n ** 3
        row = {"n": n, "cublas_ms": cublas_ms, "cublas_gflops": flops / cublas_ms / 1e6}
        for kname, layout in KERNELS.items():
            kernel = module.get_function(f"mm_{kname}")
            smem = shared_bytes(layout)
            if smem > 48 * 1024:
                kernel.max_dynamic_shared_size_bytes = smem
            grid, block = (n // BN, n // BM), (16, 16)
            c = c0.copy()
            kernel(grid, block, (a, b, c, cp.int32(n)), shared_mem=smem)
            err = float(cp.max(cp.abs(c - expected) / cp.abs(expected)))
            ok = err < 1e-4
            launch = (grid, block, (a, b, c, cp.int32(n)))
            ms = timed(lambda kernel=kernel, launch=launch, smem=smem: kernel(
                *launch, shared_mem=smem), args.repeats) if ok else None
            row[kname] = {"max_rel_error": err, "ok": ok, "ms": ms,
                          "x_cublas": cublas_ms / ms if ms else None}
            print(n, kname, row[kname], flush=True)
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {"date": datetime.date.today().isoformat(), "device": name,
           "cupy": cp.__version__, "rows": rows}
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
