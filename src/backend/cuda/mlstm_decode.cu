// The mLSTM decode step (DESIGN.md mlstm), which is also the mLSTM branch and the mix of the
// Bifocal decode step (DESIGN.md bifocal: out = o·mLSTM + (1 − o)·SWA; bifocal_decode.cu runs the
// window branch first). Contract in recurrent_decode.cuh; the math mirrors backend/cpu/mlstm.cpp.
//
// What bounds it: latency, not bytes. A Qwen3-4B layer (state=kv) moves 8 states × 64 KiB read
// and written plus (2S + Hq) = 48 gate rows × 5 KB — 1.3 MB, ~0.3 µs at 4.3 TB/s — while each
// dependent round trip to memory costs ~0.6–1 µs and each launch boundary ~2 µs. The previous
// design (the gates by a separate product kernel; then a kernel that loaded the gates and q, then
// n, k, v, then C, each behind a barrier) measured ~7 µs a layer at 4 % of the H200's bandwidth.
// Here one kernel computes its gates itself and issues all its loads together.
//
// Grid: one cluster of `ranks` blocks per state head s; block r owns the columns
// [r·d/ranks, (r+1)·d/ranks) of C_s and the same indices of n_s. A block does all its work after
// ONE round trip to memory:
//   before the wait (nothing an earlier kernel writes): the first gate weights into registers,
//     L2 prefetches of this block's slice of C and of the remaining gate rows (a prefetch is a
//     hint, not a read: L2 is the point of coherence, so it cannot make a later load stale);
//   after it, issued together: the slice of C into registers (≤ 8 float4 a thread);
//     q of the state's readers, k, n_{t−1}, m_{t−1} and v into shared memory by cp.async (no
//     registers, no stall); x for the gate products;
//   Bifocal does not wait there: its predecessor, the window attention, launches it only once
//     everything but the window's output is complete, so the gates and the state update run
//     beside the attention, and the window branch of its columns is read after a wait in step 4;
//   then arithmetic: ĩ, f̃ (Bifocal: the mix gates) as W·x + b, the step weights (every thread
//     computes them: cheaper than a barrier), q̂ᵀn_t, C_t = f′C + i′kvᵀ and q̂ᵀC_t (xor shuffles
//     and one shared-memory sum), the outputs of its columns, mixed and converted to T.
// Every block computes its state's gate products whole (2 + readers rows: Qwen3-4B Bifocal
// 6 × 5 KB, from L2 after the cluster's first block) instead of splitting them over the cluster,
// which would put a cluster barrier and a distributed-shared-memory read on the path.
// The race on n and m — every block reads all of n_{t−1} and m_{t−1}, which are overwritten in
// place (cpu::MlstmState's layout, no second copy) — is closed by the cluster barrier split in
// two: a block arrives once n_{t−1} and m_{t−1} are in its shared memory and waits only before
// storing its indices of n_t (rank 0: m_t); by then every block has long arrived.
//
// Expected cost per layer (Qwen3-4B: 32 blocks for state=kv, 128 for state=q): one round trip
// (~1 µs; less when the launch overlaps the previous kernel and the prefetches have reached L2),
// a few hundred cycles of arithmetic and two block barriers: ~2 µs, where the gate product and
// the old kernel took ~2 + 7 µs.
#include "backend/cuda/recurrent_decode.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cluster_launch.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/qk_norm_rope_device.cuh"
#include "backend/cuda/recurrent_device.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

namespace cg = cooperative_groups;
using device::kRecurrentThreads;
using device::kMaxReaders;
using device::kWarps;

// float4 vectors of C one thread holds in registers: its rows of the block's slice, at most
// kMaxStateVectors a batch. The kernel is compiled for 1, 2, 4 and 8 (SliceThreads::state_vectors): an
// array and unrolled loops sized for the shape's rows, not for the largest (Qwen3-4B's slices
// have 2 rows a thread; with 8 the state update and q̂ᵀC issued 4× their instructions, most of
// them predicated off — stop 12's ncu counted 2,263 instructions per warp).
constexpr int kMaxStateVectors = 8;
// Gate rows one pass of the gate products keeps in registers, and 16-byte chunks per row and
// thread per step (Qwen3-4B Bifocal state=kv: 6 rows of 320 bf16 chunks = one step).
constexpr int kGateRows = 6;
constexpr int kGateChunks = 2;

__host__ __device__ constexpr int power_of_two_at_least(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// How a block's threads cover its columns of C: thread → (quad of 4 columns, lane), lane l
// taking rows l, l + lanes, …. Quads are rounded up to a power of two ≤ 32 (the spare threads
// idle) so that the lanes of one quad sit quad_slots apart in a warp and xor shuffles sum them.
struct SliceThreads {
  int quads, quad_slots, lanes;
  __host__ __device__ explicit SliceThreads(int columns)
      : quads(columns / 4), quad_slots(power_of_two_at_least(columns / 4)), lanes(kRecurrentThreads / quad_slots) {}
  __host__ __device__ int rows_per_thread(int d) const { return (d + lanes - 1) / lanes; }
  // The kernel's vectors a thread for this slice: rows a thread rounded up to 1, 2, 4 or 8.
  __host__ __device__ int state_vectors(int d) const {
    const int rows = power_of_two_at_least(rows_per_thread(d));
    return rows < kMaxStateVectors ? rows : kMaxStateVectors;
  }
  // Register loads of the slice: one batch of `vectors` rows per thread, or more.
  __host__ __device__ int batches(int d, int vectors) const { return (rows_per_thread(d) + vectors - 1) / vectors; }
};

struct MlstmDecodeLayout {
  int query, key, normalizer, stabilizer, value, window, gate_partials, denominators, numerators;
  device::SharedCarve carve;
  __host__ __device__ MlstmDecodeLayout(int readers, int d, int columns, int gate_rows, bool mix) {
    query = carve.take(readers * d);                   // q of the readers [readers, d] (unscaled)
    key = carve.take(d);                               // k [d]
    normalizer = carve.take(d);                        // n_{t−1} [d]
    stabilizer = carve.take(1);                        // m_{t−1}
    value = carve.take(columns);                       // v, this block's columns
    window = carve.take(mix ? readers * columns : 0);  // the SWA branch, this block's columns
    gate_partials = carve.take(kWarps * gate_rows);    // each warp's share of W·x + b [warps, rows]
    denominators = carve.take(readers);                // max(|q̂ᵀn_t|, e^{−m_t}) + 1e-6
    numerators = carve.take(kWarps * (readers < kMaxReaders ? readers : kMaxReaders) * columns);
  }
};

// cp.async (async_copy.cuh): the thread does not stall on the copies, so they join the round trip
// of the register loads. Completed by wait_all_async_copies() and made visible to the block by the
// barrier after it.
using device::copy16_async;
using device::wait_all_async_copies;

// `rows` rows of `width` floats (a multiple of 4), global rows `stride` floats apart, into
// consecutive shared rows; 16-byte aligned on both sides.
__device__ inline void stage_rows(float* shared, const float* global, int rows, int width, std::size_t stride) {
  const int quads = width / 4;
  for (int item = threadIdx.x; item < rows * quads; item += blockDim.x) {
    const int row = item / quads, quad = item % quads;
    copy16_async(shared + row * width + 4 * quad, global + row * stride + 4 * quad);
  }
}

__device__ inline void prefetch_l2(const void* address) { asm volatile("prefetch.global.L2 [%0];" ::"l"(address)); }

// The gate rows of state head s, in order: ĩ, f̃, then (Bifocal) the mix gate of each reader.
template <typename T>
struct GateRows {
  MlstmGateProjections<T> projections;
  const T* mix_weight;
  const T* mix_bias;
  int s, first_query, count;

  static constexpr int kVector = 16 / sizeof(T);  // elements per 16-byte chunk
  __device__ const T* weights(int r) const {
    const std::size_t hidden = projections.hidden;
    if (r == 0) return projections.input_weight + s * hidden;
    if (r == 1) return projections.forget_weight + s * hidden;
    return mix_weight + (first_query + r - 2) * hidden;
  }
  __device__ float bias(int r) const {
    const T* b = r == 0   ? (projections.input_bias ? projections.input_bias + s : nullptr)
                 : r == 1 ? (projections.forget_bias ? projections.forget_bias + s : nullptr)
                          : (mix_bias ? mix_bias + first_query + r - 2 : nullptr);
    return b != nullptr ? device::to_float(*b) : 0.0f;
  }
  __device__ int chunks() const { return projections.hidden / kVector; }
  // Chunk i of step `step` of this thread.
  __device__ int chunk(int step, int i) const { return threadIdx.x + (step * kGateChunks + i) * kRecurrentThreads; }
};

// One step of the vectorized gate products: kGateChunks chunks of kGateRows rows, in registers.
struct GateWeights {
  uint4 chunk[kGateChunks][kGateRows];
};

template <typename T>
__device__ void load_gate_weights(const GateRows<T>& rows, int group, int step, GateWeights& w) {
  #pragma unroll
  for (int i = 0; i < kGateChunks; ++i)
    #pragma unroll
    for (int r = 0; r < kGateRows; ++r) {
      const int row = group * kGateRows + r, c = rows.chunk(step, i);
      w.chunk[i][r] = row < rows.count && c < rows.chunks()
                          ? __ldg(reinterpret_cast<const uint4*>(rows.weights(row)) + c)
                          : make_uint4(0, 0, 0, 0);
    }
}

// Σ W[r]·x + b[r] for every gate row, each warp's share into gate_partials [warps, rows] (summed
// by gate_total after the next barrier). `first` holds step 0 of group 0, loaded before the wait.
template <typename T>
__device__ void gate_products(const GateRows<T>& rows, bool vectorized, GateWeights& first, float* gate_partials) {
  const int groups = (rows.count + kGateRows - 1) / kGateRows;
  const int steps = (rows.chunks() + kGateChunks * kRecurrentThreads - 1) / (kGateChunks * kRecurrentThreads);
  const int hidden = rows.projections.hidden;
  for (int group = 0; group < groups; ++group) {
    float acc[kGateRows];
    #pragma unroll
    for (int r = 0; r < kGateRows; ++r)
      acc[r] = threadIdx.x == 0 && group * kGateRows + r < rows.count ? rows.bias(group * kGateRows + r) : 0.0f;
    if (vectorized) {
      for (int step = 0; step < steps; ++step) {
        if (group > 0 || step > 0) load_gate_weights(rows, group, step, first);
        uint4 x_chunks[kGateChunks];  // x is written by an earlier kernel: L2 loads, not __ldg
        #pragma unroll
        for (int i = 0; i < kGateChunks; ++i) {
          const int c = rows.chunk(step, i);
          x_chunks[i] =
              c < rows.chunks() ? __ldcg(reinterpret_cast<const uint4*>(rows.projections.x) + c) : make_uint4(0, 0, 0, 0);
        }
        #pragma unroll
        for (int i = 0; i < kGateChunks; ++i) {
          float x[GateRows<T>::kVector], w[GateRows<T>::kVector];
          device::unpack16(x_chunks[i], x, rows.projections.x);
          #pragma unroll
          for (int r = 0; r < kGateRows; ++r) {
            device::unpack16(first.chunk[i][r], w, rows.projections.x);
            #pragma unroll
            for (int e = 0; e < GateRows<T>::kVector; ++e) acc[r] = fmaf(w[e], x[e], acc[r]);
          }
        }
      }
    } else {  // rows not 16-byte aligned (an odd hidden size): element by element
      for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        const float x = device::to_float(__ldcg(rows.projections.x + c));
        #pragma unroll
        for (int r = 0; r < kGateRows; ++r)
          if (group * kGateRows + r < rows.count)
            acc[r] = fmaf(device::to_float(rows.weights(group * kGateRows + r)[c]), x, acc[r]);
      }
    }
    #pragma unroll
    for (int r = 0; r < kGateRows; ++r) {
      const int row = group * kGateRows + r;
      const float sum = device::warp_sum(acc[r]);
      if (threadIdx.x % 32 == 0 && row < rows.count) gate_partials[(threadIdx.x / 32) * rows.count + row] = sum;
    }
  }
}

__device__ inline float gate_total(const float* gate_partials, int count, int row) {
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w) total += gate_partials[w * count + row];
  return total;
}

// This thread's rows of batch `batch` of the slice (row a = (batch·kVectors + u)·lanes + lane).
template <int kVectors>
__device__ inline void load_state(const float* matrix, int d, int column, int lane, int lanes, int batch, bool active,
                                  float4 (&c)[kVectors]) {
  #pragma unroll
  for (int u = 0; u < kVectors; ++u) {
    const int a = (batch * kVectors + u) * lanes + lane;
    if (active && a < d) c[u] = __ldcg(reinterpret_cast<const float4*>(matrix + std::size_t(a) * d + column));
  }
}

// Block (rank, s): state head s, columns of rank. DESIGN.md mlstm (and bifocal's mix), one token.
// query_scale = 1/√d as the CPU computes it (float of the double), made once on the host.
template <typename T, int kVectors>
__global__ void __launch_bounds__(kRecurrentThreads)
    mlstm_decode_kernel(MlstmDecodeArgs<T> a, bool vectorized_gates, float query_scale) {
  const cg::cluster_group cluster = cg::this_cluster();
  const int d = a.shape.head_dim, s = blockIdx.y;
  const int readers = a.shape.query_heads / a.shape.states, first_query = s * readers;  // h / (Hq/S) = s
  const int kv = s / (a.shape.states / a.shape.kv_heads);                               // state=q repeats k, v
  const int ranks = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int columns = d / ranks, col_begin = rank * columns;
  const bool mix = a.mix.window_out != nullptr;
  const GateRows<T> rows{a.gates, a.mix.weight, a.mix.bias, s, first_query, 2 + (mix ? readers : 0)};

  const MlstmDecodeLayout layout(readers, d, columns, rows.count, mix);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  float* query = shared + layout.query;
  float* key = shared + layout.key;
  float* normalizer = shared + layout.normalizer;
  float* gate_partials = shared + layout.gate_partials;
  float* denominators = shared + layout.denominators;
  float* numerators = shared + layout.numerators;
  float* matrix = a.state.matrix + std::size_t(s) * d * d;

  // 0. Before the wait: the weights (no kernel writes them) and L2 prefetches.
  device::allow_next_kernel_launch();
  GateWeights weights;
  if (vectorized_gates) load_gate_weights(rows, 0, 0, weights);
  const int line_floats = 32, lines = (columns + line_floats - 1) / line_floats;
  for (int item = threadIdx.x; item < d * lines; item += blockDim.x)
    prefetch_l2(matrix + std::size_t(item / lines) * d + col_begin + (item % lines) * line_floats);
  const std::size_t row_bytes = std::size_t(a.gates.hidden) * sizeof(T);
  const std::size_t loaded_bytes = vectorized_gates ? std::size_t(kGateChunks) * kRecurrentThreads * 16 : 0;
  for (int r = 0; r < rows.count; ++r)
    for (std::size_t b = (r < kGateRows ? loaded_bytes : 0) + 128 * threadIdx.x; b < row_bytes; b += 128 * blockDim.x)
      prefetch_l2(reinterpret_cast<const char*>(rows.weights(r)) + b);
  // Bifocal: the kernel before this one is the window attention, which lets it launch only after
  // its own wait (dependent_launch.h, "triggered after the wait"): q, k, v, x and the state are
  // complete now, and only the window's output is not — this kernel waits for it in step 4 and
  // runs its gates and state update beside the attention meanwhile. Its reads before that wait
  // go through L2 (cp.async.cg, __ldcg). The mlstm mixer waits here.
  if (!mix) device::wait_for_previous_kernel();

  // 1. One round trip: the slice of C into registers, the vectors into shared memory, x.
  const SliceThreads threads(columns);
  const int quad = threadIdx.x % threads.quad_slots, lane = threadIdx.x / threads.quad_slots;
  const bool active = quad < threads.quads;
  const int column = col_begin + 4 * quad, batches = threads.batches(d, kVectors);
  float4 state[kVectors];
  load_state(matrix, d, column, lane, threads.lanes, 0, active, state);
  stage_rows(query, a.q + std::size_t(first_query) * d, readers, d, d);
  stage_rows(key, a.k + std::size_t(kv) * d, 1, d, d);
  stage_rows(normalizer, a.state.normalizer + std::size_t(s) * d, 1, d, d);
  stage_rows(shared + layout.value, a.v + std::size_t(kv) * d + col_begin, 1, columns, d);
  if (threadIdx.x == 0) shared[layout.stabilizer] = __ldcg(a.state.stabilizer + s);
  gate_products(rows, vectorized_gates, weights, gate_partials);
  wait_all_async_copies();
  __syncthreads();
  if (a.rope_inv_freq != nullptr) {  // q/k norm and RoPE folded in: the readers' q, then k, a warp each
    const float position = float(__ldcg(a.position));
    for (int item = int(threadIdx.x) / 32; item <= readers; item += kWarps) {
      float* row = item < readers ? query + item * d : key;
      device::norm_rope_head(row, row, row, item < readers ? a.q_norm : a.k_norm, a.norm_eps, true, position,
                             a.rope_inv_freq, d, 1.0f, a.rope_rotation);
    }
    __syncthreads();
  }

  // 2. The step: m_t, f′, i′ (DESIGN.md mlstm). n_{t−1} and m_{t−1} are now in shared memory:
  //    this block no longer needs them where they are stored.
  const float input_gate = gate_total(gate_partials, rows.count, 0);
  const float forget_gate = gate_total(gate_partials, rows.count, 1);
  const device::MlstmStep step = device::mlstm_step(input_gate, forget_gate, shared[layout.stabilizer]);
  cluster.barrier_arrive();
  const int warp = threadIdx.x / 32;
  for (int g = warp; g < readers; g += kWarps) {  // max(|q̂ᵀn_t|, e^{−m_t}) + 1e-6, n_t = f′n + i′k
    float dot = 0.0f;
    for (int i = threadIdx.x % 32; i < d; i += 32)
      dot = fmaf(query[g * d + i], fmaf(step.forget_weight, normalizer[i], step.input_weight * key[i]), dot);
    dot = device::warp_sum(dot);
    if (threadIdx.x % 32 == 0) denominators[g] = device::mlstm_denominator(query_scale * dot, step.stabilizer);
  }

  // 3. C_t = f′C_{t−1} + i′k vᵀ on the slice (stored), and q̂ᵀC_t, kMaxReaders readers a pass.
  const float4 v = active ? *reinterpret_cast<const float4*>(shared + layout.value + 4 * quad) : float4{};
  const int reader_slots = readers < kMaxReaders ? readers : kMaxReaders;
  for (int first = 0; first < readers; first += kMaxReaders) {
    const int heads = min(kMaxReaders, readers - first);
    float acc[kMaxReaders][4] = {};
    for (int batch = 0; batch < batches; ++batch) {
      // Later batches, and every batch of a later pass, are (re)loaded: a thread's own stores
      // are visible to its own loads. With one batch the registers still hold C_t.
      if (batches > 1 && (batch > 0 || first > 0))
        load_state(matrix, d, column, lane, threads.lanes, batch, active, state);
      #pragma unroll
      for (int u = 0; u < kVectors; ++u) {
        const int row = (batch * kVectors + u) * threads.lanes + lane;
        if (!active || row >= d) continue;
        float4& c = state[u];
        if (first == 0) {
          const float key_weight = step.input_weight * key[row];
          c.x = fmaf(step.forget_weight, c.x, key_weight * v.x);
          c.y = fmaf(step.forget_weight, c.y, key_weight * v.y);
          c.z = fmaf(step.forget_weight, c.z, key_weight * v.z);
          c.w = fmaf(step.forget_weight, c.w, key_weight * v.w);
          *reinterpret_cast<float4*>(matrix + std::size_t(row) * d + column) = c;
        }
        #pragma unroll
        for (int g = 0; g < kMaxReaders; ++g) {
          if (g >= heads) break;
          const float q = query[(first + g) * d + row];
          acc[g][0] = fmaf(q, c.x, acc[g][0]);
          acc[g][1] = fmaf(q, c.y, acc[g][1]);
          acc[g][2] = fmaf(q, c.z, acc[g][2]);
          acc[g][3] = fmaf(q, c.w, acc[g][3]);
        }
      }
    }
    // Σ over the lanes: inside the warp (a quad's lanes are quad_slots apart), then over warps.
    #pragma unroll
    for (int g = 0; g < kMaxReaders; ++g) {
      if (g >= heads) break;
      #pragma unroll
      for (int e = 0; e < 4; ++e)
        for (int offset = threads.quad_slots; offset < 32; offset *= 2)
          acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], offset);
      if (active && threadIdx.x % 32 < threads.quad_slots)
        *reinterpret_cast<float4*>(numerators + (warp * reader_slots + g) * columns + 4 * quad) =
            make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
    }
    if (mix && first == 0) {  // Bifocal: now the window branch, the one input not yet complete
      device::wait_for_previous_kernel();
      stage_rows(shared + layout.window, a.mix.window_out + std::size_t(first_query) * d + col_begin, readers, columns,
                 d);
      wait_all_async_copies();
    }
    __syncthreads();

    // 4. h = q̂ᵀC_t / denominator; Bifocal: out = o·h + (1 − o)·SWA, o = sigmoid(mix gate).
    for (int item = threadIdx.x; item < heads * columns; item += blockDim.x) {
      const int g = item / columns, c = item % columns, reader = first + g;
      float numerator = 0.0f;
      for (int w = 0; w < kWarps; ++w) numerator += numerators[(w * reader_slots + g) * columns + c];
      float h = query_scale * numerator / denominators[reader];
      if (mix) {
        const float mix_gate = gate_total(gate_partials, rows.count, 2 + reader);
        const float o = device::bifocal_memory_weight(mix_gate);
        h = o * h + (1.0f - o) * shared[layout.window + reader * columns + c];
      }
      a.out[std::size_t(first_query + reader) * d + col_begin + c] = device::from_float<T>(h);
    }
    if (first + kMaxReaders < readers) __syncthreads();  // the numerators are reused
  }

  // 5. Every block of the cluster has read n_{t−1} and m_{t−1}: store this block's n_t, and m_t.
  cluster.barrier_wait();
  for (int i = col_begin + threadIdx.x; i < col_begin + columns; i += blockDim.x)
    a.state.normalizer[std::size_t(s) * d + i] = fmaf(step.forget_weight, normalizer[i], step.input_weight * key[i]);
  if (rank == 0 && threadIdx.x == 0) a.state.stabilizer[s] = step.stabilizer;
}

// Blocks per state head: slices of 32 columns where d allows it (whole float4 columns, at most
// 128 a slice: a warp's shuffles). Fewer, wider blocks than one per multiprocessor, because every
// block repeats its state's gate products (2 + readers rows of `hidden`) and a cluster barrier,
// while a 32-column slice is already one batch of registers. Measured (stop 15, tokens/s of the
// whole decode step, blocks per head 8 / 4 / 2 / 1; docs/notes/cuda-stop15-2026-12-01.md):
//   Qwen3-4B (d = 128)   Bifocal 319 / 353 / 350 / 343   mlstm:state=q 340 / 362 / 362 / 357
//   Qwen3.5-like (256)   Bifocal 394 / 394 / 385 / —     mlstm:state=kv 414 / 407 / 391 / —
//   paper-fig2 (64)      Bifocal 6303 / 7472 / 7518 / 7496   mlstm:state=kv 8431 / 8651 / 8554 / 8269
// The old rule (one block per multiprocessor: 8 a head) cost Bifocal 10–19%: its step runs beside
// the window attention, whose clusters then found no room. 32 columns is best or within 1.1%.
int mlstm_decode_ranks(int d) {
  const int quads = d / 4;
  const int wanted = (d + 31) / 32;
  int chosen = 0;
  for (int ranks = 1; ranks <= kMaxClusterRanks; ++ranks) {
    if (quads % ranks != 0 || quads / ranks > 32) continue;
    chosen = ranks;
    if (ranks >= wanted) break;
  }
  return chosen;
}

bool aligned16(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; }

// Head dimensions the kernel handles: whole float4 column slices (recurrent_decode.cu's rule).
void check_head_dim(int head_dim) {
  if (head_dim <= 0 || head_dim % 8 != 0 || head_dim > 256)
    fail("mlstm_decode", "head dimension " + std::to_string(head_dim) + " is not a multiple of 8 in 8 … 256");
}

}  // namespace

template <typename T>
void mlstm_decode(const MlstmDecodeArgs<T>& a, cudaStream_t stream) {
  const cpu::MlstmShape& shape = a.shape;
  cpu::mlstm_check_shape(shape);
  check_head_dim(shape.head_dim);
  const MlstmGateProjections<T>& gates = a.gates;
  const bool mix = a.mix.window_out != nullptr;
  if (gates.hidden <= 0 || gates.x == nullptr || gates.input_weight == nullptr || gates.forget_weight == nullptr ||
      (mix && a.mix.weight == nullptr))
    fail("mlstm_decode", "the gate projections and the layer input are required");
  // The vectors staged by cp.async (16-byte copies) must be 16-byte aligned.
  for (const void* pointer : {static_cast<const void*>(a.q), static_cast<const void*>(a.k),
                              static_cast<const void*>(a.v), static_cast<const void*>(a.state.matrix),
                              static_cast<const void*>(a.state.normalizer), static_cast<const void*>(a.mix.window_out)})
    if (!aligned16(pointer)) fail("mlstm_decode", "q, k, v, the state and the window output must be 16-byte aligned");
  // 16-byte loads of the gate rows need rows of whole chunks; otherwise element by element.
  const bool vectorized = gates.hidden * sizeof(T) % 16 == 0 && aligned16(gates.x) && aligned16(gates.input_weight) &&
                          aligned16(gates.forget_weight) && aligned16(a.mix.weight);
  const int ranks = mlstm_decode_ranks(shape.head_dim);
  const int readers = shape.query_heads / shape.states;
  const MlstmDecodeLayout layout(readers, shape.head_dim, shape.head_dim / ranks, 2 + (mix ? readers : 0), mix);
  const float query_scale = float(1.0 / std::sqrt(double(shape.head_dim)));  // q̂ = q/√d, as cpu/mlstm.cpp
  const dim3 grid(ranks, shape.states);
  const std::size_t shared_bytes = layout.carve.bytes();
  auto launch = [&](auto kernel) {
    launch_in_clusters(kernel, grid, kRecurrentThreads, ranks, shared_bytes, stream, "mlstm_decode_kernel", a,
                       vectorized, query_scale);
  };
  switch (SliceThreads(shape.head_dim / ranks).state_vectors(shape.head_dim)) {
    case 1: launch(mlstm_decode_kernel<T, 1>); break;
    case 2: launch(mlstm_decode_kernel<T, 2>); break;
    case 4: launch(mlstm_decode_kernel<T, 4>); break;
    default: launch(mlstm_decode_kernel<T, kMaxStateVectors>); break;
  }
}

template void mlstm_decode<__nv_bfloat16>(const MlstmDecodeArgs<__nv_bfloat16>&, cudaStream_t);
template void mlstm_decode<float>(const MlstmDecodeArgs<float>&, cudaStream_t);
template void mlstm_decode<__half>(const MlstmDecodeArgs<__half>&, cudaStream_t);

}  // namespace bifocal::cuda
