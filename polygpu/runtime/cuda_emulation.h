// polygpu CUDA emulation: compile generated __global__ kernels as C++20 with g++ and run
// them on the host, so that generated code can be checked without a GPU.
//
// The model of execution:
//   * the blocks of a launch run one after another, in blockIdx order (x fastest);
//   * the threads of a block run concurrently, one std::thread each, and __syncthreads()
//     is one phase of a std::barrier shared by exactly the block's threads (or, for kernels
//     without __syncthreads(), one after another on the calling thread: see the launcher).
//
// Why `__shared__` may simply become `static`: a function-static array is one object for
// the whole program, and shared memory is one object per *block in flight*.  Since only one
// block is in flight at a time, and every thread of that block executes the same function,
// the static array is exactly that block's shared memory.  (Like real shared memory it is not
// cleared between blocks: a kernel that reads it before writing it is wrong on the GPU too.)
//
// A thread that returns from the kernel leaves the block barrier (arrive_and_drop), as an
// exited warp stops counting at bar.sync on the hardware, so an early `return` of some threads
// followed by a __syncthreads() of the others does not deadlock.  Divergent __syncthreads()
// (reached by some live threads and not others) is undefined in CUDA and is not emulated.
//
// Compiled with `g++ -std=c++20 -pthread`.  Identifiers of the emulator start with
// `polygpu_`; kernels must not use that prefix.
#pragma once

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

// ---- qualifiers ---------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__
#define __managed__
#define __align__(n) __attribute__((aligned(n)))
// __restrict__ is already a g++ keyword with the same meaning.

// ---- vector types (16-byte global loads of staged copies) ---------------------------------
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(16))) double2 {
    double x, y;
};

// ---- built-in variables -------------------------------------------------------------------
struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
        : x(x_), y(y_), z(z_) {}
};

// `static`: one translation unit, internal linkage, so g++ uses the cheap local TLS model.
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;
static constexpr int warpSize = 32;

namespace polygpu_emu {
using Barrier = std::barrier<>;
static thread_local Barrier *block_barrier = nullptr;
static thread_local unsigned char *dynamic_shared = nullptr;
}  // namespace polygpu_emu

// ---- synchronisation and atomics ------------------------------------------------------------
static inline void __syncthreads() {
    if (!polygpu_emu::block_barrier) {  // a launch the host side ran sequentially
        fputs("polygpu emulator: __syncthreads() in a launch run without threads\n", stderr);
        abort();
    }
    polygpu_emu::block_barrier->arrive_and_wait();
}
// __syncwarp(mask): a barrier of the block's threads in `mask` (lanes of the caller's warp):
// one std::barrier per (first thread, mask), made on first use.  CUDA requires every thread
// in the mask to pass the same __syncwarp calls, so each phase completes and the barrier is
// reused as it is by the next block and launch.
namespace polygpu_emu {
static std::mutex warp_barriers_mutex;
static std::map<std::pair<unsigned, unsigned>, std::unique_ptr<Barrier>> warp_barriers;
}  // namespace polygpu_emu
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    if (!polygpu_emu::block_barrier) {
        fputs("polygpu emulator: __syncwarp() in a launch run without threads\n", stderr);
        abort();
    }
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned lane = t % 32;
    if (!(mask >> lane & 1u)) {
        fputs("polygpu emulator: __syncwarp(mask) by a thread outside mask\n", stderr);
        abort();
    }
    polygpu_emu::Barrier *b;
    {
        std::lock_guard<std::mutex> lock(polygpu_emu::warp_barriers_mutex);
        auto &slot = polygpu_emu::warp_barriers[{t - lane + unsigned(__builtin_ctz(mask)), mask}];
        if (!slot)
            slot = std::make_unique<polygpu_emu::Barrier>(std::ptrdiff_t(__builtin_popcount(mask)));
        b = slot.get();
    }
    b->arrive_and_wait();
}
// polygpu_named_barrier(id, threads): PTX bar.sync id, threads -- a barrier of the
// `threads` threads (whole warps) that name `id`; one std::barrier per (id, threads),
// reused by the next block like the warps' (blocks run one after another).
#define POLYGPU_EMULATION 1
namespace polygpu_emu {
static std::map<std::pair<int, int>, std::unique_ptr<Barrier>> named_barriers;
}  // namespace polygpu_emu
static inline void polygpu_named_barrier(int id, int threads) {
    if (!polygpu_emu::block_barrier) {
        fputs("polygpu emulator: a named barrier in a launch run without threads\n", stderr);
        abort();
    }
    polygpu_emu::Barrier *b;
    {
        std::lock_guard<std::mutex> lock(polygpu_emu::warp_barriers_mutex);
        auto &slot = polygpu_emu::named_barriers[{id, threads}];
        if (!slot)
            slot = std::make_unique<polygpu_emu::Barrier>(std::ptrdiff_t(threads));
        b = slot.get();
    }
    b->arrive_and_wait();
}
// __shfl_xor_sync(mask, v, lane_mask, width): the value of lane (lane ^ lane_mask) within
// the caller's segment of `width` lanes, through one slot per lane of the warp's exchange
// (one per (first thread, mask), like the barriers above): write, barrier, read, barrier.
namespace polygpu_emu {
struct WarpExchange {
    alignas(16) unsigned char slot[32][16];
};
static std::map<std::pair<unsigned, unsigned>, std::unique_ptr<WarpExchange>> warp_exchanges;
}  // namespace polygpu_emu
namespace polygpu_emu {
// the value of lane `source(lane)` of the caller's warp: one slot per lane of the warp's
// exchange, written, a barrier, read, a barrier
template <class T, class Source>
static inline T shuffle(unsigned mask, T v, Source source) {
    static_assert(sizeof(T) <= 16, "polygpu emulator: shuffle of a wide type");
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned lane = t % 32;
    WarpExchange *x;
    {
        std::lock_guard<std::mutex> lock(warp_barriers_mutex);
        auto &slot = warp_exchanges[{t - lane + unsigned(__builtin_ctz(mask)), mask}];
        if (!slot)
            slot = std::make_unique<WarpExchange>();
        x = slot.get();
    }
    memcpy(x->slot[lane], &v, sizeof(T));
    __syncwarp(mask);
    T out;
    memcpy(&out, x->slot[source(lane)], sizeof(T));
    __syncwarp(mask);
    return out;
}
}  // namespace polygpu_emu
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    return polygpu_emu::shuffle(mask, v, [&](unsigned lane) {
        unsigned segment = lane & ~unsigned(width - 1);
        return segment | ((lane ^ unsigned(lane_mask)) & unsigned(width - 1));
    });
}
// __shfl_sync(mask, v, source, width): the value of lane `source` of the caller's segment of
// `width` lanes (codegen/mma.py's emulated tensor-core step)
template <class T>
static inline T __shfl_sync(unsigned mask, T v, int source, int width = 32) {
    return polygpu_emu::shuffle(mask, v, [&](unsigned lane) {
        return (lane & ~unsigned(width - 1)) | (unsigned(source) & unsigned(width - 1));
    });
}
static inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <class T>
static inline T atomicAdd(T *p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <class T>
static inline T atomicSub(T *p, T v) { return std::atomic_ref<T>(*p).fetch_sub(v); }
template <class T>
static inline T atomicExch(T *p, T v) { return std::atomic_ref<T>(*p).exchange(v); }
template <class T>
static inline T atomicMax(T *p, T v) {
    std::atomic_ref<T> r(*p);
    T old = r.load();
    while (old < v && !r.compare_exchange_weak(old, v)) {}
    return old;
}
template <class T>
static inline T atomicMin(T *p, T v) {
    std::atomic_ref<T> r(*p);
    T old = r.load();
    while (v < old && !r.compare_exchange_weak(old, v)) {}
    return old;
}

// ---- integer min/max (CUDA declares them for every integer pair) ------------------------------
// Arithmetic operands of mixed types take their usual common type, as CUDA's overloads do.
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
static inline std::common_type_t<A, B> min(A a, B b) {
    using C = std::common_type_t<A, B>;
    return C(a) < C(b) ? C(a) : C(b);
}
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
static inline std::common_type_t<A, B> max(A a, B b) {
    using C = std::common_type_t<A, B>;
    return C(a) < C(b) ? C(b) : C(a);
}

// ---- float intrinsics missing from <cmath> --------------------------------------------------
// sqrtf, expf, fabsf, fminf, fmaxf, fmaf, ... come from <math.h>.
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __fdividef(float a, float b) { return a / b; }
// glibc declares __expf & co. itself (its internal names), hence macros, not functions;
// through std:: (its float overloads), because a fast-math program defines expf as
// __expf (codegen/expressions.py FAST_MATH) and GCC would expand that name again.
#define __expf(x) std::exp((float)(x))
#define __logf(x) std::log((float)(x))
#define __sinf(x) std::sin((float)(x))
#define __cosf(x) std::cos((float)(x))
#define __powf(a, b) std::pow((float)(a), (float)(b))
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }

// ---- the launcher -----------------------------------------------------------------------------
namespace polygpu_emu {

static char last_error[512];

static inline int fail(const char *kernel, const char *what, dim3 g, dim3 b) {
    snprintf(last_error, sizeof last_error,
             "launch of %s: %s (grid %u x %u x %u, block %u x %u x %u)", kernel, what, g.x, g.y,
             g.z, b.x, b.y, b.z);
    return 1;
}

static inline int bad_grid(const char *kernel, long long x, long long y, long long z) {
    snprintf(last_error, sizeof last_error,
             "launch of %s: grid expressions evaluate to %lld x %lld x %lld (CUDA allows 1 to "
             "2147483647 x 65535 x 65535)", kernel, x, y, z);
    return 1;
}

// Rebuilds the block barrier for the next block: every thread left it when its kernel
// returned (arrive_and_drop), so its expected count is spent.  Runs once per block, after all
// threads have arrived at the block gate and before any is released.
struct NextBlock {
    unsigned char *storage;
    std::ptrdiff_t threads;
    void operator()() noexcept {
        Barrier *old = std::launder(reinterpret_cast<Barrier *>(storage));
        old->~Barrier();
        new (storage) Barrier(threads);
    }
};

}  // namespace polygpu_emu

// Runs kernel<<<grid, block, shared_bytes>>>(args...) to completion.  Returns 0, or 1 with a
// message in polygpu_emu::last_error for a configuration CUDA would refuse.
//
// `concurrent` false runs each block's threads one after another on the calling thread: for a
// kernel that never calls __syncthreads() that is one of the schedules CUDA allows, and it
// avoids thread creation and context switches (the threaded mode costs about a microsecond
// per thread and barrier phase).
template <class... P>
static int polygpu_emulate_launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block,
                                  std::size_t shared_bytes, bool concurrent,
                                  std::type_identity_t<P>... args) {
    using namespace polygpu_emu;
    const unsigned long long threads = 1ull * block.x * block.y * block.z;
    if (grid.x < 1 || grid.y < 1 || grid.z < 1)
        return fail(name, "empty grid", grid, block);
    if (grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u)
        return fail(name, "grid too large", grid, block);
    if (threads < 1 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
        return fail(name, "invalid block (at most 1024 x 1024 x 64, 1024 threads)", grid, block);
    if (shared_bytes > 227 * 1024)
        return fail(name, "too much dynamic shared memory", grid, block);

    const unsigned long long blocks = 1ull * grid.x * grid.y * grid.z;
    std::vector<unsigned char> dynamic(shared_bytes + 16);
    auto set_block = [&](unsigned long long b) {
        blockIdx = {unsigned(b % grid.x), unsigned(b / grid.x % grid.y),
                    unsigned(b / (1ull * grid.x * grid.y))};
    };
    auto set_thread = [&](unsigned t) {
        threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
    };
    blockDim = block;
    gridDim = grid;
    dynamic_shared = dynamic.data();

    if (!concurrent) {
        block_barrier = nullptr;
        for (unsigned long long b = 0; b < blocks; ++b) {
            set_block(b);
            for (unsigned t = 0; t < threads; ++t) {
                set_thread(t);
                kernel(args...);
            }
        }
        return 0;
    }

    alignas(Barrier) unsigned char storage[sizeof(Barrier)];
    new (storage) Barrier(std::ptrdiff_t(threads));
    std::barrier<NextBlock> gate(std::ptrdiff_t(threads),
                                 NextBlock{storage, std::ptrdiff_t(threads)});
    auto worker = [&](unsigned t) {
        set_thread(t);
        blockDim = block;
        gridDim = grid;
        dynamic_shared = dynamic.data();
        block_barrier = std::launder(reinterpret_cast<Barrier *>(storage));
        for (unsigned long long b = 0; b < blocks; ++b) {
            set_block(b);
            kernel(args...);
            block_barrier->arrive_and_drop();
            gate.arrive_and_wait();
        }
    };
    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker, t);
    worker(0);  // the calling thread is thread 0
    for (auto &th : pool) th.join();
    block_barrier = nullptr;
    std::launder(reinterpret_cast<Barrier *>(storage))->~Barrier();
    return 0;
}
