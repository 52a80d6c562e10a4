// One-token decode steps of the linear-attention and LoLCATs mixers (the mLSTM step, with
// Bifocal's mix, is in mlstm_decode.cu). Contracts in recurrent_decode.cuh; the math is
// DESIGN.md's, mirrored from backend/cpu/{linear_attention,lolcats}.cpp.
//
// Grid: one cluster of `ranks` blocks per KV head. Block r of a cluster owns the state columns
// [r·d/ranks, (r+1)·d/ranks): it updates them, reads them with its query heads, and writes those
// columns of the outputs. The normalizer (f floats) is updated redundantly by every block — each
// needs all of φ(q)ᵀz — and stored by block 0 after a cluster barrier, once every block has read
// the old one. LoLCATs' window rows are split over the cluster by slot, and each block merges all
// blocks' softmax partials for its columns through distributed shared memory.
//
// Bytes per step (what bounds them, all in one pass): linear Hkv·f·d·8; LoLCATs Hkv·f·d·8 when a
// key leaves the window (·4 otherwise) plus the window, w·Hkv·d·2·sizeof(T). Both kernels are
// programmatic dependent launches (cluster_launch.h): they wait for the previous kernel before
// touching memory.
#include "backend/cuda/recurrent_decode.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <string>

#include "backend/cuda/cluster_launch.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/recurrent_device.cuh"
#include "backend/cuda/window_device.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

namespace cg = cooperative_groups;
using device::kRecurrentThreads;

// Head dimensions the kernels handle: 8-element rows for the window, float4 column slices.
void check_head_dim(int head_dim, const char* where) {
  if (head_dim <= 0 || head_dim % 8 != 0 || head_dim > 256)
    fail(where, "head dimension " + std::to_string(head_dim) + " is not a multiple of 8 in 8 … 256");
}

// =============================================================================================
// Linear attention and LoLCATs share the feature maps and the linear state.

using device::LinearDims;
using device::hedgehog_slice;

LinearDims dims_of(const cpu::LinearShape& shape) {
  return {shape.query_heads, shape.kv_heads, shape.head_dim, shape.feature_dim(),
          shape.feature == cpu::FeatureMap::Hedgehog};
}

struct LinearDecodeLayout {
  int rows, features, value, next_normalizer, denominator, numerators, scratch;
  device::SharedCarve carve;
  __host__ __device__ LinearDecodeLayout(int readers, int d, int f, int columns) {
    rows = carve.take((readers + 1) * d);          // k, then the group's q [1 + readers, d]
    features = carve.take((readers + 1) * f);      // φ of those rows [1 + readers, f]
    value = carve.take(d);                         // v [d]
    next_normalizer = carve.take(f);               // z_t [f]
    denominator = carve.take(readers);             // φ(q)ᵀz_t + ε [readers]
    numerators = carve.take(readers * columns);    // φ(q)ᵀS_t, this block's columns
    scratch = carve.take(device::state_pass_scratch_floats(columns));
  }
};

// Block (rank, kv): the state of KV head kv, columns of rank. DESIGN.md linear, one token.
__global__ void __launch_bounds__(kRecurrentThreads)
    linear_decode_kernel(LinearDims dims, const float* hedgehog_weight, const float* q, const float* k, const float* v,
                         cpu::LinearState state, float* out) {
  const cg::cluster_group cluster = cg::this_cluster();
  const int d = dims.head_dim, f = dims.feature_dim, kv = blockIdx.y;
  const int readers = dims.query_heads / dims.kv_heads, first_query = kv * readers;
  const int ranks = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int columns = d / ranks, col_begin = rank * columns;

  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // q, k, v and the state are written by earlier kernels

  const LinearDecodeLayout layout(readers, d, f, columns);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  float* rows = shared + layout.rows;
  float* features = shared + layout.features;
  float* value = shared + layout.value;
  float* next_normalizer = shared + layout.next_normalizer;
  float* denominator = shared + layout.denominator;
  float* numerators = shared + layout.numerators;

  for (int a = threadIdx.x; a < d; a += blockDim.x) {
    rows[a] = k[std::size_t(kv) * d + a];
    value[a] = v[std::size_t(kv) * d + a];
  }
  for (int i = threadIdx.x; i < readers * d; i += blockDim.x) rows[d + i] = q[std::size_t(first_query) * d + i];
  __syncthreads();
  device::feature_map_rows(rows, readers + 1, d, hedgehog_slice(dims, hedgehog_weight, kv), features);

  // z_t = z_{t−1} + φ(k), then φ(q)ᵀz_t + ε per reader.
  const float* normalizer = state.normalizer + std::size_t(kv) * f;
  for (int a = threadIdx.x; a < f; a += blockDim.x) next_normalizer[a] = normalizer[a] + features[a];
  __syncthreads();
  for (int g = threadIdx.x / 32; g < readers; g += blockDim.x / 32) {
    float dot = 0.0f;
    for (int a = threadIdx.x % 32; a < f; a += 32) dot = fmaf(features[(1 + g) * f + a], next_normalizer[a], dot);
    dot = device::warp_sum(dot);
    if (threadIdx.x % 32 == 0) denominator[g] = dot + cpu::kLinearEps;
  }

  // S_t = S_{t−1} + φ(k)vᵀ and φ(q)ᵀS_t, this block's columns.
  device::state_columns_pass(state.matrix + std::size_t(kv) * f * d, f, d, col_begin, columns, true, 1.0f, features,
                             value, features + f, f, readers, numerators, shared + layout.scratch);
  for (int i = threadIdx.x; i < readers * columns; i += blockDim.x) {
    const int g = i / columns, c = i % columns;
    out[std::size_t(first_query + g) * d + col_begin + c] = numerators[i] / denominator[g];
  }

  cluster.sync();  // every block has read z_{t−1}
  if (rank == 0)
    for (int a = threadIdx.x; a < f; a += blockDim.x) state.normalizer[std::size_t(kv) * f + a] = next_normalizer[a];
}

// The LoLCATs window of one KV head for the query at t: slots 0 … filled − 1 of the ring, the
// slot t mod w holding the new token (read from the fp32 input as the ring will keep it).
template <typename T>
struct LolcatsWindowRows {
  const T* keys;
  const T* values;
  const float* new_key;    // [d] of this KV head
  const float* new_value;
  int kv_heads, d, kv;
  std::int64_t filled;
  std::int64_t current_slot;

  __device__ bool visible(int j) const { return j < filled; }
  __device__ void load(const T* cache, const float* fresh, int j, int offset, float* out) const {
    if (j == current_slot) {
      #pragma unroll
      for (int e = 0; e < 8; ++e) out[e] = device::stored_as<T>(fresh[offset + e]);
    } else {
      device::load8(cache + (std::size_t(j) * kv_heads + kv) * d + offset, out);
    }
  }
  __device__ void load_key(int j, int offset, float* out) const { load(keys, new_key, j, offset, out); }
  __device__ void load_value(int j, int offset, float* out) const { load(values, new_value, j, offset, out); }
};

struct LolcatsDecodeLayout {
  int rows, features, value, next_normalizer, linear_denominator, numerators;
  int window_max, window_sum, window_acc, scratch;
  device::SharedCarve carve;
  __host__ __device__ LolcatsDecodeLayout(int readers, int d, int f, int columns) {
    rows = carve.take((readers + 1) * d);           // the leaving key (or 0), then q [1 + readers, d]
    features = carve.take((readers + 1) * f);       // their φ
    value = carve.take(d);                          // the leaving value
    next_normalizer = carve.take(f);                // z after the leaving key
    linear_denominator = carve.take(readers);       // φ(q)ᵀz
    numerators = carve.take(readers * columns);     // φ(q)ᵀS, this block's columns
    window_max = carve.take(readers);               // this block's window partial
    window_sum = carve.take(readers);
    window_acc = carve.take(readers * d);
    scratch = carve.take(max(device::state_pass_scratch_floats(columns),  // the two passes take turns
                             device::window_scratch_floats(d, kRecurrentThreads)));
  }
};

// Block (rank, kv): LoLCATs for KV head kv (cpu::lolcats_step_by_step, one token). HEADS: the
// window pass's heads in registers (window_partial), the group's size rounded up to a power of two.
template <typename T, int HEADS>
__global__ void __launch_bounds__(kRecurrentThreads)
    lolcats_decode_kernel(LinearDims dims, int window, const float* hedgehog_weight, const float* window_factor,
                          const float* q, const float* k, const float* v, LolcatsDeviceState<T> state, float* out) {
  const cg::cluster_group cluster = cg::this_cluster();
  const int d = dims.head_dim, f = dims.feature_dim, kv = blockIdx.y, kv_heads = dims.kv_heads;
  const int readers = dims.query_heads / kv_heads, first_query = kv * readers;
  const int ranks = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int columns = d / ranks, col_begin = rank * columns;

  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // the inputs, the ring, the state and tokens_seen

  const std::int64_t t = *state.tokens_seen;
  const std::int64_t current_slot = t % window;  // holds key t − w until this step replaces it
  const bool leaving = t >= window;
  const std::int64_t filled = min(t + 1, std::int64_t(window));

  const LolcatsDecodeLayout layout(readers, d, f, columns);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  float* rows = shared + layout.rows;
  float* features = shared + layout.features;
  float* value = shared + layout.value;
  float* next_normalizer = shared + layout.next_normalizer;
  float* linear_denominator = shared + layout.linear_denominator;
  float* numerators = shared + layout.numerators;
  const device::WindowPartial partial{shared + layout.window_max, shared + layout.window_sum,
                                     shared + layout.window_acc};
  float* scratch = shared + layout.scratch;

  // The state pass runs after the window: have L2 fetch this block's columns meanwhile.
  float* matrix = state.linear.matrix + std::size_t(kv) * f * d;
  if (leaving) device::prefetch_state_columns(matrix, f, d, col_begin);

  // 1. The queries, and the key t − w leaving W(t) = {t−w+1 … t} for the linear state.
  const std::size_t current_row = (std::size_t(current_slot) * kv_heads + kv) * d;
  for (int a = threadIdx.x; a < d; a += blockDim.x) {
    rows[a] = leaving ? float(state.window_keys[current_row + a]) : 0.0f;
    value[a] = leaving ? float(state.window_values[current_row + a]) : 0.0f;
  }
  for (int i = threadIdx.x; i < readers * d; i += blockDim.x) rows[d + i] = q[std::size_t(first_query) * d + i];
  __syncthreads();

  // 2. The window part over this block's share of the ring.
  const LolcatsWindowRows<T> ring{state.window_keys, state.window_values, k + std::size_t(kv) * d,
                                  v + std::size_t(kv) * d, kv_heads, d, kv, filled, current_slot};
  const int begin = int(filled * rank / ranks), end = int(filled * (rank + 1) / ranks);
  device::window_partial<HEADS>(ring, begin, end, rows + d, readers, d, partial, scratch);

  // 3. The linear part: S += φ(k_{t−w}) v_{t−w}ᵀ, z += φ(k_{t−w}) (only when a key leaves), then
  //    φ(q)ᵀS for this block's columns and φ(q)ᵀz.
  device::feature_map_rows(rows, readers + 1, d, hedgehog_slice(dims, hedgehog_weight, kv), features);
  const float* normalizer = state.linear.normalizer + std::size_t(kv) * f;
  for (int a = threadIdx.x; a < f; a += blockDim.x) next_normalizer[a] = normalizer[a] + (leaving ? features[a] : 0.0f);
  __syncthreads();
  for (int g = threadIdx.x / 32; g < readers; g += blockDim.x / 32) {
    float dot = 0.0f;
    for (int a = threadIdx.x % 32; a < f; a += 32) dot = fmaf(features[(1 + g) * f + a], next_normalizer[a], dot);
    dot = device::warp_sum(dot);
    if (threadIdx.x % 32 == 0) linear_denominator[g] = dot;
  }
  device::state_columns_pass(matrix, f, d, col_begin, columns, leaving, 1.0f, features, value, features + f, f,
                             readers, numerators, scratch);

  // 4. y = (γ Σ_W e^{s−m} v + φ(q)ᵀS) / (γ Σ_W e^{s−m} + φ(q)ᵀz), m the row max over all of W.
  cluster.sync();
  const auto partial_of = [&](int r) {
    return device::WindowPartial{cluster.map_shared_rank(partial.max, r), cluster.map_shared_rank(partial.sum, r),
                                 cluster.map_shared_rank(partial.acc, r)};
  };
  float* stats_max = scratch;  // the scratch is free: this block's passes are done
  float* stats_sum = scratch + ranks * readers;
  device::gather_window_stats(partial_of, ranks, readers, stats_max, stats_sum);
  for (int i = threadIdx.x; i < readers * columns; i += blockDim.x) {
    const int g = i / columns, c = i % columns, head = first_query + g;
    const device::WindowSums sums =
        device::window_total(partial_of, ranks, stats_max, stats_sum, readers, g, col_begin + c, d, -INFINITY);
    const float gamma = device::stable_sigmoid(window_factor[head]);
    out[std::size_t(head) * d + col_begin + c] =
        (gamma * sums.numerator + numerators[i]) / (gamma * sums.denominator + linear_denominator[g]);
  }

  // 5. Every block has read z and the leaving slot: store z and the new token in its slot.
  if (rank == 0) {
    for (int a = threadIdx.x; a < f; a += blockDim.x)
      state.linear.normalizer[std::size_t(kv) * f + a] = next_normalizer[a];
    for (int a = threadIdx.x; a < d; a += blockDim.x) {
      state.window_keys[current_row + a] = device::to_storage<T>(k[std::size_t(kv) * d + a]);
      state.window_values[current_row + a] = device::to_storage<T>(v[std::size_t(kv) * d + a]);
    }
  }
  cluster.sync();  // no block leaves while another still reads its partial
}

}  // namespace

void linear_decode(const cpu::LinearShape& shape, const float* hedgehog_weight, const float* q, const float* k,
                   const float* v, cpu::LinearState state, float* out, cudaStream_t stream) {
  cpu::linear_check_shape(shape, hedgehog_weight);
  check_head_dim(shape.head_dim, "linear_decode");
  const LinearDims dims = dims_of(shape);
  const auto shared_bytes = [&](int ranks) {
    return LinearDecodeLayout(shape.group(), dims.head_dim, dims.feature_dim, dims.head_dim / ranks).carve.bytes();
  };
  const int ranks = one_wave_cluster_ranks(linear_decode_kernel, dims.head_dim, dims.kv_heads, kRecurrentThreads,
                                           shared_bytes, "linear_decode_kernel");
  launch_in_clusters(linear_decode_kernel, dim3(ranks, dims.kv_heads), kRecurrentThreads, ranks, shared_bytes(ranks),
                     stream, "linear_decode_kernel", dims, hedgehog_weight, q, k, v, state, out);
}

template <typename T>
void lolcats_decode(const cpu::LinearShape& shape, int window, const float* hedgehog_weight,
                    const float* window_factor, const float* q, const float* k, const float* v,
                    LolcatsDeviceState<T> state, float* out, cudaStream_t stream) {
  cpu::linear_check_shape(shape, hedgehog_weight);
  check_head_dim(shape.head_dim, "lolcats_decode");
  if (window <= 0) fail("lolcats_decode", "window must be positive");
  const LinearDims dims = dims_of(shape);
  const auto shared_bytes = [&](int ranks) {
    return LolcatsDecodeLayout(shape.group(), dims.head_dim, dims.feature_dim, dims.head_dim / ranks).carve.bytes();
  };
  const auto launch = [&](auto kernel) {
    // One wave matters here: with 8 heads in registers the window pass holds 224 registers a
    // thread, one block a multiprocessor.
    const int ranks =
        one_wave_cluster_ranks(kernel, dims.head_dim, dims.kv_heads, kRecurrentThreads, shared_bytes, "lolcats_decode_kernel");
    launch_in_clusters(kernel, dim3(ranks, dims.kv_heads), kRecurrentThreads, ranks, shared_bytes(ranks), stream,
                       "lolcats_decode_kernel", dims, window, hedgehog_weight, window_factor, q, k, v, state, out);
  };
  const int group = shape.group();
  if (group <= 1) return launch(lolcats_decode_kernel<T, 1>);
  if (group <= 2) return launch(lolcats_decode_kernel<T, 2>);
  if (group <= 4) return launch(lolcats_decode_kernel<T, 4>);
  launch(lolcats_decode_kernel<T, device::kWindowHeads>);
}

template void lolcats_decode<__nv_bfloat16>(const cpu::LinearShape&, int, const float*, const float*, const float*,
                                            const float*, const float*, LolcatsDeviceState<__nv_bfloat16>, float*,
                                            cudaStream_t);
template void lolcats_decode<float>(const cpu::LinearShape&, int, const float*, const float*, const float*,
                                    const float*, const float*, LolcatsDeviceState<float>, float*, cudaStream_t);
template void lolcats_decode<__half>(const cpu::LinearShape&, int, const float*, const float*, const float*,
                                     const float*, const float*, LolcatsDeviceState<__half>, float*, cudaStream_t);

}  // namespace bifocal::cuda
