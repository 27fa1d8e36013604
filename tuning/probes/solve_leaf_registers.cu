// Probe (issue 22, 2026-12-08): one 64-row leaf of a recursive trsm with 512 right-hand
// sides (m = 4096), timed as polygpu emits it today (SOLVE_LEAF: a column on a warp's
// lanes, strip and rows in shared memory, __syncwarp between rows) against the column
// spread over a group's lanes *in registers* (lane l of LANES owns rows l, l + LANES, ...;
// the divided row broadcast by __shfl_sync; no shared memory in the chain).  Each launch
// timed alone with CUDA events (b restored before it), median of 200 after 20 warm-ups;
// every form checked against the first.
// Build and run: nvcc -O3 -arch=sm_90 -o /tmp/leaf tuning/probes/solve_leaf_registers.cu && /tmp/leaf
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

constexpr int m = 4096, n = 512, ROWS = 64, COLS = 8;  // a leaf; columns a block

__device__ void stage(const float *a, const float *b, float (*a_sh)[ROWS + 1],
                      float (*b_sh)[COLS + 1], int bx, int tid, int threads) {
  for (int i = tid; i < ROWS * ROWS; i += threads) {
    const int r = i / ROWS, c = i % ROWS;
    if (r >= c) a_sh[r][c] = a[r * m + c];
  }
  for (int i = tid; i < ROWS * COLS; i += threads) {
    const int r = i / COLS, c = i % COLS;
    b_sh[r][c] = b[r * n + COLS * bx + c];
  }
}

__device__ void unstage(float *b, float (*b_sh)[COLS + 1], int bx, int tid, int threads) {
  for (int i = tid; i < ROWS * COLS; i += threads) {
    const int r = i / COLS, c = i % COLS;
    b[r * n + COLS * bx + c] = b_sh[r][c];
  }
}

// today's leaf (as emitted for SOLVE_LEAF, the staging simplified)
__global__ void __launch_bounds__(256) leaf_lanes(const float *__restrict__ a, float *__restrict__ b) {
  __shared__ __align__(16) float a_sh[ROWS][ROWS + 1];
  __shared__ __align__(16) float b_sh[ROWS][COLS + 1];
  const int bx = blockIdx.x, tx = threadIdx.x / 32, lane = threadIdx.x % 32;
  stage(a, b, a_sh, b_sh, bx, threadIdx.x, 256);
  __syncthreads();
  for (int c2 = 0; c2 < ROWS; c2 += 1) {
    if (lane == 0) b_sh[c2][tx] = b_sh[c2][tx] / (a_sh[c2][c2] + m);
    __syncwarp();
    int c4 = c2 + 1 + lane;
    if (c4 <= ROWS - 1) {
      const float inv = b_sh[c2][tx];
#pragma unroll 4
      for (; c4 <= ROWS - 1; c4 += 32) b_sh[c4][tx] -= a_sh[c4][c2] * inv;
    }
    __syncwarp();
  }
  __syncthreads();
  unstage(b, b_sh, bx, threadIdx.x, 256);
}

// the column on LANES lanes in registers; TWO: the owner divides, then a second shuffle
// broadcasts (what a general emitter writes: the division and the update are two
// statements); else every lane divides the shuffled value itself
// DIRECT: the registers loaded from and stored to global memory by each lane (a
// column's rows: a sector a lane), not through b_sh
template <int LANES, bool TWO, bool DIRECT = false>
__global__ void __launch_bounds__(COLS * LANES) leaf_registers(const float *__restrict__ a, float *__restrict__ b) {
  constexpr int SLOTS = ROWS / LANES;
  __shared__ __align__(16) float a_sh[ROWS][ROWS + 1];
  __shared__ __align__(16) float b_sh[ROWS][COLS + 1];
  const int bx = blockIdx.x, tx = threadIdx.x / LANES, lane = threadIdx.x % LANES;
  const unsigned mask = LANES == 32 ? 0xffffffffu : ((1u << LANES) - 1) << (threadIdx.x % 32 / LANES * LANES);
  float x[SLOTS];
  if (DIRECT) {
#pragma unroll
    for (int r = 0; r < SLOTS; r++) x[r] = b[(LANES * r + lane) * n + COLS * bx + tx];
    for (int i = threadIdx.x; i < ROWS * ROWS; i += COLS * LANES) {
      const int r = i / ROWS, c = i % ROWS;
      if (r >= c) a_sh[r][c] = a[r * m + c];
    }
  } else {
    stage(a, b, a_sh, b_sh, bx, threadIdx.x, COLS * LANES);
  }
  __syncthreads();
  if (!DIRECT) {
#pragma unroll
    for (int r = 0; r < SLOTS; r++) x[r] = b_sh[LANES * r + lane][tx];
  }
#pragma unroll
  for (int k = 0; k < ROWS; k++) {
    const float d = a_sh[k][k] + m;
    float v;
    if (TWO) {
      const float s = __shfl_sync(mask, x[k / LANES], k % LANES, LANES);
      if (lane == k % LANES) x[k / LANES] = s / d;
      v = __shfl_sync(mask, x[k / LANES], k % LANES, LANES);
    } else {
      v = __shfl_sync(mask, x[k / LANES], k % LANES, LANES) / d;
      if (lane == k % LANES) x[k / LANES] = v;
    }
#pragma unroll
    for (int r = 0; r < SLOTS; r++) {
      const int i = LANES * r + lane;
      if (LANES * r + LANES - 1 > k && i > k) x[r] -= a_sh[i][k] * v;
    }
  }
  if (DIRECT) {
#pragma unroll
    for (int r = 0; r < SLOTS; r++) b[(LANES * r + lane) * n + COLS * bx + tx] = x[r];
    return;
  }
#pragma unroll
  for (int r = 0; r < SLOTS; r++) b_sh[LANES * r + lane][tx] = x[r];
  __syncthreads();
  unstage(b, b_sh, bx, threadIdx.x, COLS * LANES);
}

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

template <typename F>
float timed(F launch, float *b, const float *b0) {
  cudaEvent_t s, e;
  cudaEventCreate(&s); cudaEventCreate(&e);
  std::vector<float> t;
  for (int it = 0; it < 220; it++) {
    cudaMemcpy(b, b0, sizeof(float) * m * n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(s); launch(); cudaEventRecord(e); cudaEventSynchronize(e);
    float ms; cudaEventElapsedTime(&ms, s, e);
    if (it >= 20) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] * 1e3f;
}

int main() {
  std::vector<float> ha(size_t(m) * m), hb(size_t(m) * n);
  unsigned s = 12345;
  for (auto &v : ha) { s = s * 1664525u + 1013904223u; v = 0.5f + (s >> 8) * (1.0f / 16777216.0f); }
  for (auto &v : hb) { s = s * 1664525u + 1013904223u; v = 0.5f + (s >> 8) * (1.0f / 16777216.0f); }
  float *a, *b, *b0;
  CHECK(cudaMalloc(&a, sizeof(float) * ha.size())); CHECK(cudaMalloc(&b, sizeof(float) * hb.size()));
  CHECK(cudaMalloc(&b0, sizeof(float) * hb.size()));
  cudaMemcpy(a, ha.data(), sizeof(float) * ha.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(b0, hb.data(), sizeof(float) * hb.size(), cudaMemcpyHostToDevice);
  std::vector<float> ref(size_t(ROWS) * n), got(size_t(ROWS) * n);
  struct Form { const char *name; void (*k)(const float *, float *); int threads; };
  Form forms[] = {{"lanes (today)", leaf_lanes, 256},
                  {"registers 32 lanes, one shuffle", leaf_registers<32, false>, 256},
                  {"registers 32 lanes, two shuffles", leaf_registers<32, true>, 256},
                  {"registers 16 lanes, one shuffle", leaf_registers<16, false>, 128},
                  {"registers 16 lanes, two shuffles", leaf_registers<16, true>, 128},
                  {"registers 8 lanes, one shuffle", leaf_registers<8, false>, 64},
                  {"registers 8 lanes, two shuffles", leaf_registers<8, true>, 64},
                  {"registers 32 lanes, two shuffles, direct", leaf_registers<32, true, true>, 256},
                  {"registers 8 lanes, two shuffles, direct", leaf_registers<8, true, true>, 64}};
  printf("| leaf form (64 rows, 512 columns, m = 4096) | us | x today | max rel. diff |\n|---|--:|--:|--:|\n");
  float base = 0;
  for (int f = 0; f < 9; f++) {
    auto go = [&] { forms[f].k<<<n / COLS, forms[f].threads>>>(a, b); };
    float us = timed(go, b, b0);
    CHECK(cudaGetLastError());
    cudaMemcpy(b, b0, sizeof(float) * m * n, cudaMemcpyDeviceToDevice);
    go(); CHECK(cudaDeviceSynchronize());
    cudaMemcpy(f ? got.data() : ref.data(), b, sizeof(float) * ROWS * n, cudaMemcpyDeviceToHost);
    double diff = 0;
    for (size_t i = 0; f && i < got.size(); i++)
      diff = std::max(diff, std::fabs(double(got[i]) - ref[i]) / std::max(1e-30, std::fabs(double(ref[i]))));
    if (!f) base = us;
    printf("| %s | %.2f | %.2f | %.1e |\n", forms[f].name, us, base / us, diff);
  }
  return 0;
}
