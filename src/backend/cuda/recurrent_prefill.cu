// Chunkwise prefill of the linear-attention and LoLCATs mixers (the mLSTM's is mlstm_prefill.cu).
// Contracts in recurrent_prefill.cuh; the math mirrors backend/cpu/linear_attention.cpp
// (linear_head_chunkwise) and lolcats.cpp.
//
// Linear attention first maps q and k through φ (feature_rows_kernel) into the workspace, then runs
// the chunkwise core (recurrent_chunkwise.cuh); LoLCATs maps q and the keys as they leave the
// window, runs the core unnormalised, then its window part merges the two (lolcats_window_kernel)
// and the ring takes the last w tokens (lolcats_store_kernel).
#include "backend/cuda/recurrent_prefill.cuh"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/recurrent_chunkwise.cuh"
#include "backend/cuda/recurrent_device.cuh"
#include "backend/cuda/window_device.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

using device::kRecurrentThreads;
using device::LinearDims;

void check_head_dim(int head_dim, const char* where) {
  if (head_dim <= 0 || head_dim % 8 != 0 || head_dim > 256)
    fail(where, "head dimension " + std::to_string(head_dim) + " is not a multiple of 8 in 8 … 256");
}

LinearDims dims_of(const cpu::LinearShape& shape) {
  return {shape.query_heads, shape.kv_heads, shape.head_dim, shape.feature_dim(),
          shape.feature == cpu::FeatureMap::Hedgehog};
}

// =============================================================================================
// Feature maps of the n tokens, and LoLCATs' window part and ring update.

// The key row (and value) token i contributes to the linear state. bind() runs once per block
// and resolves what the functor reads from device memory.
struct OwnKeys {  // linear attention: its own k
  const float* k;
  int kv_heads, d;
  static constexpr bool kCopiesValues = false;
  __device__ OwnKeys bind() const { return *this; }
  __device__ float key(int i, int kv, int a) const { return k[(std::size_t(i) * kv_heads + kv) * d + a]; }
};

// LoLCATs: the key t − w leaving the window at t = start + i, as the ring keeps it.
template <typename T>
struct LeavingKeysAt {
  const float *k, *v;
  const T *ring_keys, *ring_values;
  std::int64_t start;
  int window, kv_heads, d;
  __device__ float read(const float* fresh, const T* ring, int i, int kv, int a) const {
    const std::int64_t position = start + i - window;
    if (position < 0) return 0.0f;  // nothing leaves yet (its weight is 0)
    if (position >= start) return device::stored_as<T>(fresh[(std::size_t(position - start) * kv_heads + kv) * d + a]);
    return float(ring[(std::size_t(position % window) * kv_heads + kv) * d + a]);
  }
  __device__ float key(int i, int kv, int a) const { return read(k, ring_keys, i, kv, a); }
  __device__ float value(int i, int kv, int a) const { return read(v, ring_values, i, kv, a); }
};

template <typename T>
struct LeavingKeys {
  const float *k, *v;
  const T *ring_keys, *ring_values;
  const std::int64_t* tokens_seen;
  int window, kv_heads, d;
  static constexpr bool kCopiesValues = true;
  __device__ LeavingKeysAt<T> bind() const {
    return {k, v, ring_keys, ring_values, *tokens_seen, window, kv_heads, d};
  }
};

// Block (i, kv): φ of token i's key row and of its G query rows → key_features [n, Hkv, f],
// query_features [n, Hq, f]; LoLCATs also copies the leaving value → leaving_values [n, Hkv, d].
template <typename Keys>
__global__ void __launch_bounds__(kRecurrentThreads)
    feature_rows_kernel(LinearDims dims, const float* hedgehog_weight, const float* q, Keys unbound_keys,
                        float* query_features, float* key_features, float* leaving_values) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // q, k, v (and the ring) come from earlier kernels
  const auto keys = unbound_keys.bind();
  const int i = blockIdx.x, kv = blockIdx.y, d = dims.head_dim, f = dims.feature_dim;
  const int group = dims.query_heads / dims.kv_heads;
  extern __shared__ float4 shared_memory[];
  float* rows = reinterpret_cast<float*>(shared_memory);  // [1 + G, d]
  float* features = rows + device::padded((group + 1) * d);  // [1 + G, f]
  for (int a = threadIdx.x; a < d; a += blockDim.x) {
    rows[a] = keys.key(i, kv, a);
    if constexpr (Keys::kCopiesValues)
      leaving_values[(std::size_t(i) * dims.kv_heads + kv) * d + a] = keys.value(i, kv, a);
  }
  const std::size_t first_query_row = std::size_t(i) * dims.query_heads + std::size_t(kv) * group;
  for (int x = threadIdx.x; x < group * d; x += blockDim.x) rows[d + x] = q[first_query_row * d + x];
  __syncthreads();
  device::feature_map_rows(rows, group + 1, d, device::hedgehog_slice(dims, hedgehog_weight, kv), features);
  for (int a = threadIdx.x; a < f; a += blockDim.x)
    key_features[(std::size_t(i) * dims.kv_heads + kv) * f + a] = features[a];
  for (int x = threadIdx.x; x < group * f; x += blockDim.x) query_features[first_query_row * f + x] = features[f + x];
}

template <typename Keys>
void launch_feature_rows(const LinearDims& dims, int n, const float* hedgehog_weight, const float* q, Keys keys,
                         float* query_features, float* key_features, float* leaving_values, cudaStream_t stream) {
  const int group = dims.query_heads / dims.kv_heads;
  const std::size_t bytes =
      (device::padded((group + 1) * dims.head_dim) + device::padded((group + 1) * dims.feature_dim)) * sizeof(float);
  launch_dependent(feature_rows_kernel<Keys>, dim3(n, dims.kv_heads), dim3(kRecurrentThreads), bytes, stream,
                   "feature_rows_kernel", dims, hedgehog_weight, q, keys, query_features, key_features,
                   leaving_values);
}

// LoLCATs' window for token i: positions max(0, t−w+1) … t, t = start + i; the ring holds those
// before `start`, the inputs (rounded to T) the rest.
template <typename T>
struct PrefillWindowRows {
  const float *k, *v;
  const T *ring_keys, *ring_values;
  std::int64_t start, first_position;
  int window, kv_heads, d, kv;
  __device__ bool visible(int) const { return true; }
  __device__ void load(const float* fresh, const T* ring, int j, int offset, float* out) const {
    const std::int64_t position = first_position + j;
    if (position >= start) {
      const float* row = fresh + (std::size_t(position - start) * kv_heads + kv) * d + offset;
      #pragma unroll
      for (int e = 0; e < 8; ++e) out[e] = device::stored_as<T>(row[e]);
    } else {
      device::load8(ring + (std::size_t(position % window) * kv_heads + kv) * d + offset, out);
    }
  }
  __device__ void load_key(int j, int offset, float* out) const { load(k, ring_keys, j, offset, out); }
  __device__ void load_value(int j, int offset, float* out) const { load(v, ring_values, j, offset, out); }
};

struct PrefillWindowLayout {
  int queries, window_max, window_sum, window_acc, scratch;
  device::SharedCarve carve;
  __host__ __device__ PrefillWindowLayout(int group, int d) {
    queries = carve.take(group * d);
    window_max = carve.take(group);
    window_sum = carve.take(group);
    window_acc = carve.take(group * d);
    scratch = carve.take(device::window_scratch_floats(d, kRecurrentThreads));
  }
};

// Block (i, kv): y = (γ Σ_W e^{s−m} v + φ(q)ᵀS) / (γ Σ_W e^{s−m} + φ(q)ᵀz) for token i's G query
// heads, out holding φ(q)ᵀS (from chunkwise_kernel) on entry.
template <typename T>
__global__ void __launch_bounds__(kRecurrentThreads)
    lolcats_window_kernel(LinearDims dims, int window, const float* window_factor, const float* q, const float* k,
                          const float* v, const T* ring_keys, const T* ring_values, const std::int64_t* tokens_seen,
                          const float* linear_denominators, float* out) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // out (φ(q)ᵀS) and the denominators come from chunkwise_kernel
  const int i = blockIdx.x, kv = blockIdx.y, d = dims.head_dim;
  const int group = dims.query_heads / dims.kv_heads, first_query = kv * group;
  const std::int64_t start = *tokens_seen, t = start + i;
  const std::int64_t first_position = max(std::int64_t(0), t - window + 1);

  const PrefillWindowLayout layout(group, d);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  float* queries = shared + layout.queries;
  const device::WindowPartial partial{shared + layout.window_max, shared + layout.window_sum,
                                     shared + layout.window_acc};
  for (int x = threadIdx.x; x < group * d; x += blockDim.x)
    queries[x] = q[(std::size_t(i) * dims.query_heads + first_query) * d + x];
  __syncthreads();

  const PrefillWindowRows<T> rows{k, v, ring_keys, ring_values, start, first_position, window, dims.kv_heads, d, kv};
  device::window_partial(rows, 0, int(t - first_position + 1), queries, group, d, partial, shared + layout.scratch);
  const auto partial_of = [&](int) { return partial; };
  for (int x = threadIdx.x; x < group * d; x += blockDim.x) {
    const int g = x / d, c = x % d, head = first_query + g;
    const device::WindowSums sums =
        device::window_total(partial_of, 1, partial.max, partial.sum, group, g, c, d, -INFINITY);
    const float gamma = device::stable_sigmoid(window_factor[head]);
    float* o = out + (std::size_t(i) * dims.query_heads + head) * d + c;
    *o = (gamma * sums.numerator + *o) /
         (gamma * sums.denominator + linear_denominators[std::size_t(i) * dims.query_heads + head]);
  }
}

// The last min(w, start + n) tokens into their ring slots p mod w (after every reader of the ring).
template <typename T>
__global__ void lolcats_store_kernel(const float* k, const float* v, int n, int window, int kv_heads, int d,
                                     const std::int64_t* tokens_seen, T* ring_keys, T* ring_values) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // every reader of the ring has run
  const std::int64_t start = *tokens_seen;
  const std::int64_t first = max(start, start + n - window);
  const std::int64_t row = std::int64_t(kv_heads) * d, count = (start + n - first) * row;
  for (std::int64_t x = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; x < count;
       x += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t position = first + x / row, within = x % row;
    const std::size_t from = std::size_t(position - start) * row + within;
    const std::size_t to = std::size_t(position % window) * row + within;
    ring_keys[to] = device::to_storage<T>(k[from]);
    ring_values[to] = device::to_storage<T>(v[from]);
  }
}

// Workspace of linear and LoLCATs prefill, in floats, each part 16-byte aligned.
struct PrefillWorkspace {
  float *query_features, *key_features, *leaving_values, *denominators;
};

PrefillWorkspace carve_workspace(const cpu::LinearShape& shape, int n, void* base, std::size_t* bytes) {
  const std::size_t f = shape.feature_dim(), d = shape.head_dim, rows_q = std::size_t(n) * shape.query_heads,
                    rows_kv = std::size_t(n) * shape.kv_heads;
  const auto round4 = [](std::size_t floats) { return (floats + 3) / 4 * 4; };
  const std::size_t sizes[4] = {round4(rows_q * f), round4(rows_kv * f), round4(rows_kv * d), round4(rows_q)};
  float* at = static_cast<float*>(base);
  PrefillWorkspace parts{};
  float** slots[4] = {&parts.query_features, &parts.key_features, &parts.leaving_values, &parts.denominators};
  std::size_t total = 0;
  for (int p = 0; p < 4; ++p) {
    *slots[p] = at == nullptr ? nullptr : at + total;
    total += sizes[p];
  }
  if (bytes != nullptr) *bytes = total * sizeof(float);
  return parts;
}

}  // namespace

std::size_t linear_prefill_workspace_bytes(const cpu::LinearShape& shape, int n) {
  std::size_t bytes = 0;
  carve_workspace(shape, n, nullptr, &bytes);
  return bytes;
}

void linear_prefill(const cpu::LinearShape& shape, const float* hedgehog_weight, const float* q, const float* k,
                    const float* v, int n, cpu::LinearState state, float* out, void* workspace,
                    cudaStream_t stream) {
  cpu::linear_check_shape(shape, hedgehog_weight);
  check_head_dim(shape.head_dim, "linear_prefill");
  if (n <= 0) return;
  const LinearDims dims = dims_of(shape);
  const PrefillWorkspace parts = carve_workspace(shape, n, workspace, nullptr);
  launch_feature_rows(dims, n, hedgehog_weight, q, OwnKeys{k, dims.kv_heads, dims.head_dim}, parts.query_features,
                      parts.key_features, nullptr, stream);
  ChunkwiseArgs args{};
  args.n = n;
  args.query_heads = dims.query_heads, args.kv_heads = dims.kv_heads;
  args.feature_dim = dims.feature_dim, args.head_dim = dims.head_dim;
  args.query_features = parts.query_features;
  args.key_features = parts.key_features, args.values = v;
  args.matrix = state.matrix, args.normalizer = state.normalizer;
  args.out = out;
  launch_chunkwise(ChunkwiseNormalisation::Linear, args, stream);
}

std::size_t lolcats_prefill_workspace_bytes(const cpu::LinearShape& shape, int n) {
  return linear_prefill_workspace_bytes(shape, n);
}

template <typename T>
void lolcats_prefill(const cpu::LinearShape& shape, int window, const float* hedgehog_weight,
                     const float* window_factor, const float* q, const float* k, const float* v, int n,
                     LolcatsDeviceState<T> state, float* out, void* workspace, cudaStream_t stream) {
  cpu::linear_check_shape(shape, hedgehog_weight);
  check_head_dim(shape.head_dim, "lolcats_prefill");
  if (window <= 0) fail("lolcats_prefill", "window must be positive");
  if (n <= 0) return;
  const LinearDims dims = dims_of(shape);
  const PrefillWorkspace parts = carve_workspace(shape, n, workspace, nullptr);

  // 1. φ(q), and φ and value of each token's leaving key.
  launch_feature_rows(dims, n, hedgehog_weight, q,
                      LeavingKeys<T>{k, v, state.window_keys, state.window_values, state.tokens_seen, window,
                                     dims.kv_heads, dims.head_dim},
                      parts.query_features, parts.key_features, parts.leaving_values, stream);

  // 2. The linear part, unnormalised: out = φ(q)ᵀS, denominators = φ(q)ᵀz.
  ChunkwiseArgs args{};
  args.n = n;
  args.query_heads = dims.query_heads, args.kv_heads = dims.kv_heads;
  args.feature_dim = dims.feature_dim, args.head_dim = dims.head_dim;
  args.query_features = parts.query_features;
  args.key_features = parts.key_features, args.values = parts.leaving_values;
  args.tokens_seen = state.tokens_seen, args.window = window;
  args.matrix = state.linear.matrix, args.normalizer = state.linear.normalizer;
  args.out = out, args.denominators = parts.denominators;
  launch_chunkwise(ChunkwiseNormalisation::Unnormalised, args, stream);

  // 3. The window part, merged with the linear part into out.
  const PrefillWindowLayout layout(shape.group(), dims.head_dim);
  launch_dependent(lolcats_window_kernel<T>, dim3(n, dims.kv_heads), dim3(kRecurrentThreads), layout.carve.bytes(),
                   stream, "lolcats_window_kernel", dims, window, window_factor, q, k, v, state.window_keys,
                   state.window_values, state.tokens_seen, parts.denominators, out);

  // 4. The ring keeps the last w tokens.
  const std::int64_t stored = std::int64_t(std::min(n, window)) * dims.kv_heads * dims.head_dim;
  const int blocks = int(std::min<std::int64_t>((stored + kRecurrentThreads - 1) / kRecurrentThreads, 1024));
  launch_dependent(lolcats_store_kernel<T>, dim3(blocks), dim3(kRecurrentThreads), 0, stream, "lolcats_store_kernel", k,
                   v, n, window, dims.kv_heads, dims.head_dim, state.tokens_seen, state.window_keys,
                   state.window_values);
}

template void lolcats_prefill<__nv_bfloat16>(const cpu::LinearShape&, int, const float*, const float*, const float*,
                                             const float*, const float*, int, LolcatsDeviceState<__nv_bfloat16>,
                                             float*, void*, cudaStream_t);
template void lolcats_prefill<float>(const cpu::LinearShape&, int, const float*, const float*, const float*,
                                     const float*, const float*, int, LolcatsDeviceState<float>, float*, void*,
                                     cudaStream_t);
template void lolcats_prefill<__half>(const cpu::LinearShape&, int, const float*, const float*, const float*,
                                      const float*, const float*, int, LolcatsDeviceState<__half>, float*, void*,
                                      cudaStream_t);

}  // namespace bifocal::cuda
