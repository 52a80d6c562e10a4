// The fused Bifocal decode kernel (contract in bifocal_decode.cuh; CPU counterpart
// mixer/bifocal_mixer.cpp = SlidingWindowMixer + MlstmMixer + the gate mix).
//
// Grid: one cluster of `ranks` blocks per KV head. Block r of a cluster
//   1. runs the online softmax of the group's G query heads over its share of the window slots,
//      [r·w/ranks, (r+1)·w/ranks) — a partial (max, Σe, Σe·v) per head in shared memory;
//   2. for each of the KV head's states (1 for state=kv, G for state=q) updates the state columns
//      [r·d/ranks, (r+1)·d/ranks) and reads them with the state's query heads (q̂ᵀC_t), and
//      updates all of n_t (each block needs q̂ᵀn_t) — the recurrence of DESIGN.md mlstm;
//   3. after a cluster barrier merges every block's window partials for its columns through
//      distributed shared memory, applies the learned sink, and writes
//      out = o·(q̂ᵀC_t / (max(|q̂ᵀn_t|, e^{−m_t}) + 1e-6)) + (1 − o)·SWA for its columns;
//   4. block 0 stores n_t and m_t (every block has read n_{t−1}, m_{t−1} by the barrier).
//
// Bytes per step and KV head (what bounds it, HBM): the window 2·w·d·sizeof(T) (Qwen3-4B,
// bifocal(448, kv), bf16: 224 KiB) + the state(s) read and written, (S/Hkv)·d²·4·2 (128 KiB) +
// slot positions; arithmetic ~4 flops per window element and ~2 + 2·(readers) per state element.
// With 8 KV heads and 8 blocks per cluster, 64 multiprocessors share these ~2.8 MiB per layer.
#include "backend/cuda/bifocal_decode.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <string>

#include "backend/cuda/cluster_launch.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/recurrent_device.cuh"
#include "backend/cuda/window_device.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

namespace cg = cooperative_groups;
using device::kRecurrentThreads;

// States one block updates (state=q: the G query heads of a KV head), bounded for the shared
// array of their gate steps.
constexpr int kMaxStatesPerKvHead = 64;

// The window cache of one KV head, with the mask of backend.h's key_visible (and empty slots,
// position −1, never visible).
template <typename T>
struct WindowSlots {
  const T* keys;
  const T* values;
  const std::int64_t* slot_positions;
  std::int64_t position;
  int window, sink_tokens, kv_heads, d, kv;

  __device__ bool visible(int j) const {
    const std::int64_t kp = slot_positions[j];
    if (kp < 0 || kp > position) return false;
    return kp < sink_tokens || position - kp < window - sink_tokens;
  }
  __device__ void load_key(int j, int offset, float* out) const {
    device::load8(keys + (std::size_t(j) * kv_heads + kv) * d + offset, out);
  }
  __device__ void load_value(int j, int offset, float* out) const {
    device::load8(values + (std::size_t(j) * kv_heads + kv) * d + offset, out);
  }
};

struct BifocalLayout {
  int query, query_hat, key_weight, value, next_normalizer, denominator, numerators;
  int window_max, window_sum, window_acc, scratch;
  device::SharedCarve carve;
  __host__ __device__ BifocalLayout(int group, int states_here, int d, int columns) {
    query = carve.take(group * d);                  // q of the G query heads [G, d] (window logits)
    query_hat = carve.take(group * d);              // q̂ = q/√d [G, d] (mLSTM readout)
    key_weight = carve.take(d);                     // i′·k of the state being updated [d]
    value = carve.take(d);                          // v [d]
    next_normalizer = carve.take(states_here * d);  // n_t of each state [S/Hkv, d]
    denominator = carve.take(group);                // max(|q̂ᵀn_t|, e^{−m_t}) + 1e-6 [G]
    numerators = carve.take(group * columns);       // q̂ᵀC_t, this block's columns [G, columns]
    window_max = carve.take(group);                 // this block's window partial
    window_sum = carve.take(group);
    window_acc = carve.take(group * d);
    scratch = carve.take(max(device::state_pass_scratch_floats(columns),  // the two passes take turns
                             device::window_scratch_floats(d, kRecurrentThreads)));
  }
};

template <typename T>
__global__ void __launch_bounds__(kRecurrentThreads) bifocal_decode_kernel(BifocalDecodeArgs<T> args) {
  const cg::cluster_group cluster = cg::this_cluster();
  const cpu::MlstmShape& shape = args.shape;
  const int d = shape.head_dim, kv = blockIdx.y;
  const int group = shape.query_heads / shape.kv_heads, first_query = kv * group;
  const int states_here = shape.states / shape.kv_heads;  // 1 (state=kv) or G (state=q)
  const int readers = group / states_here;                // query heads per state
  const int ranks = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int columns = d / ranks, col_begin = rank * columns;

  const BifocalLayout layout(group, states_here, d, columns);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  float* query = shared + layout.query;
  float* query_hat = shared + layout.query_hat;
  float* key_weight = shared + layout.key_weight;
  float* value = shared + layout.value;
  float* next_normalizer = shared + layout.next_normalizer;
  float* denominator = shared + layout.denominator;
  float* numerators = shared + layout.numerators;
  const device::WindowPartial partial{shared + layout.window_max, shared + layout.window_sum,
                                     shared + layout.window_acc};
  float* scratch = shared + layout.scratch;
  __shared__ device::MlstmStep steps[kMaxStatesPerKvHead];

  // The gate steps of this KV head's states (m_t, f′, i′), q, q̂ = q/√d, v.
  for (int i = threadIdx.x; i < states_here; i += blockDim.x) {
    const int s = kv * states_here + i;
    steps[i] = device::mlstm_step(args.input_gate[s], args.forget_gate[s], args.state.stabilizer[s]);
  }
  const float query_scale = float(1.0 / sqrt(double(d)));
  for (int i = threadIdx.x; i < group * d; i += blockDim.x) {
    query[i] = args.q[std::size_t(first_query) * d + i];
    query_hat[i] = query[i] * query_scale;
  }
  for (int a = threadIdx.x; a < d; a += blockDim.x) value[a] = args.v[std::size_t(kv) * d + a];
  __syncthreads();

  for (int i = 0; i < states_here; ++i)  // read after the window: have L2 fetch it meanwhile
    device::prefetch_state_columns(args.state.matrix + std::size_t(kv * states_here + i) * d * d, d, d, col_begin);

  // 1. The window branch over this block's slots.
  const WindowSlots<T> slots{args.keys,   args.values,      args.slot_positions, *args.position,
                             args.window, args.sink_tokens, shape.kv_heads,      d, kv};
  const int begin = args.window * rank / ranks, end = args.window * (rank + 1) / ranks;
  device::window_partial(slots, begin, end, query, group, d, partial, scratch);

  // 2. The mLSTM branch, state by state: C_t = f′C_{t−1} + i′k vᵀ, n_t = f′n_{t−1} + i′k.
  for (int i = 0; i < states_here; ++i) {
    const int s = kv * states_here + i, first_reader = i * readers;
    const device::MlstmStep step = steps[i];
    const float* normalizer = args.state.normalizer + std::size_t(s) * d;
    for (int a = threadIdx.x; a < d; a += blockDim.x) {
      key_weight[a] = step.input_weight * args.k[std::size_t(kv) * d + a];
      next_normalizer[i * d + a] = fmaf(step.forget_weight, normalizer[a], key_weight[a]);
    }
    __syncthreads();
    for (int g = first_reader + threadIdx.x / 32; g < first_reader + readers; g += blockDim.x / 32) {
      float dot = 0.0f;
      for (int a = threadIdx.x % 32; a < d; a += 32) dot = fmaf(query_hat[g * d + a], next_normalizer[i * d + a], dot);
      dot = device::warp_sum(dot);
      if (threadIdx.x % 32 == 0) denominator[g] = device::mlstm_denominator(dot, step.stabilizer);
    }
    // Ends with a barrier, so key_weight is free for the next state.
    device::state_columns_pass(args.state.matrix + std::size_t(s) * d * d, d, d, col_begin, columns, true,
                               step.forget_weight, key_weight, value, query_hat + first_reader * d, d, readers,
                               numerators + first_reader * columns, scratch);
  }

  // 3. Merge the window partials of the cluster and mix: out = o·mLSTM + (1 − o)·SWA.
  cluster.sync();
  const auto partial_of = [&](int r) {
    return device::WindowPartial{cluster.map_shared_rank(partial.max, r), cluster.map_shared_rank(partial.sum, r),
                                 cluster.map_shared_rank(partial.acc, r)};
  };
  float* stats_max = scratch;  // the scratch is free: this block's passes are done
  float* stats_sum = scratch + ranks * group;
  device::gather_window_stats(partial_of, ranks, group, stats_max, stats_sum);
  for (int i = threadIdx.x; i < group * columns; i += blockDim.x) {
    const int g = i / columns, c = i % columns, head = first_query + g;
    const float sink = args.learned_sinks != nullptr ? args.learned_sinks[head] : -INFINITY;
    const device::WindowSums sums =
        device::window_total(partial_of, ranks, stats_max, stats_sum, group, g, col_begin + c, d, sink);
    const float window_branch = sums.numerator / sums.denominator;
    const float memory_branch = numerators[i] / denominator[g];
    const float o = 1.0f / (1.0f + expf(-args.mix_gate[head]));  // as bifocal_mixer.cpp
    args.out[std::size_t(head) * d + col_begin + c] = o * memory_branch + (1.0f - o) * window_branch;
  }

  // 4. n_t and m_t, once every block has read n_{t−1} and m_{t−1}.
  if (rank == 0) {
    for (int i = threadIdx.x; i < states_here * d; i += blockDim.x)
      args.state.normalizer[std::size_t(kv) * states_here * d + i] = next_normalizer[i];
    for (int i = threadIdx.x; i < states_here; i += blockDim.x)
      args.state.stabilizer[kv * states_here + i] = steps[i].stabilizer;
  }
  cluster.sync();  // no block leaves while another still reads its partial
}

// out = o·memory + (1 − o)·window, elementwise; one thread per element (memory bound, 12 bytes).
__global__ void bifocal_mix_kernel(const float* mix_gate, const float* mlstm_out, float* window_out,
                                   std::int64_t count, int head_dim) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const float o = 1.0f / (1.0f + expf(-mix_gate[i / head_dim]));
    window_out[i] = o * mlstm_out[i] + (1.0f - o) * window_out[i];
  }
}

}  // namespace

template <typename T>
void bifocal_decode(const BifocalDecodeArgs<T>& args, cudaStream_t stream) {
  const cpu::MlstmShape& shape = args.shape;
  cpu::mlstm_check_shape(shape);
  const int d = shape.head_dim;
  if (d % 8 != 0 || d > 256)
    fail("bifocal_decode", "head dimension " + std::to_string(d) + " is not a multiple of 8 in 8 … 256");
  if (shape.states / shape.kv_heads > kMaxStatesPerKvHead)
    fail("bifocal_decode", "more than " + std::to_string(kMaxStatesPerKvHead) + " states per KV head");
  if (args.window <= 0 || args.sink_tokens < 0 || args.sink_tokens >= args.window)
    fail("bifocal_decode", "window " + std::to_string(args.window) + " with " + std::to_string(args.sink_tokens) +
                               " sink tokens");
  const int ranks = cluster_ranks(d, shape.kv_heads);
  const int group = shape.query_heads / shape.kv_heads;
  const BifocalLayout layout(group, shape.states / shape.kv_heads, d, d / ranks);
  launch_in_clusters(bifocal_decode_kernel<T>, dim3(ranks, shape.kv_heads), kRecurrentThreads, ranks,
                     layout.carve.bytes(), stream, "bifocal_decode_kernel", args);
}

template void bifocal_decode<__nv_bfloat16>(const BifocalDecodeArgs<__nv_bfloat16>&, cudaStream_t);
template void bifocal_decode<float>(const BifocalDecodeArgs<float>&, cudaStream_t);

void bifocal_mix(const float* mix_gate, const float* mlstm_out, float* window_out, int n, int query_heads,
                 int head_dim, cudaStream_t stream) {
  const std::int64_t count = std::int64_t(n) * query_heads * head_dim;
  if (count == 0) return;
  constexpr int threads = 256;
  const int blocks = int(std::min<std::int64_t>((count + threads - 1) / threads, 4096));
  bifocal_mix_kernel<<<blocks, threads, 0, stream>>>(mix_gate, mlstm_out, window_out, count, head_dim);
  check_launch("bifocal_mix_kernel");
}

}  // namespace bifocal::cuda
