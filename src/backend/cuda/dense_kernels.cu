// The dense, non-attention kernels of the forward pass (dense_kernels.cuh says what each computes).
// Each mirrors the CPU backend (src/backend/cpu/cpu_backend.cpp) operation for operation in fp32,
// so the two agree to float rounding.
#include "backend/cuda/dense_kernels.cuh"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/qk_norm_rope_device.cuh"

namespace bifocal::cuda {
namespace {

constexpr int kWarpSize = 32;

using device::from_float;
using device::to_float;
using device::warp_sum;

// Sum over the whole block, returned to every thread. blockDim.x is a multiple of 32. Called at
// most once per kernel (the shared partials are not re-synchronised for a second call).
__device__ float block_sum(float v) {
  __shared__ float warp_partials[1024 / kWarpSize];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = warp_sum(v);
  if (lane == 0) warp_partials[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarpSize;
  return warp_sum(lane < warps ? warp_partials[lane] : 0.0f);
}

int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

// Threads for a block that walks one row of `length` elements: one element per thread up to 1024.
int threads_for_row(int length) { return std::clamp(round_up(length, kWarpSize), kWarpSize, 1024); }

// Blocks of 256 threads for an elementwise grid-stride loop over `count` elements.
constexpr int kElementwiseThreads = 256;
unsigned elementwise_blocks(std::int64_t count) {
  const std::int64_t blocks = (count + kElementwiseThreads - 1) / kElementwiseThreads;
  return unsigned(std::clamp<std::int64_t>(blocks, 1, std::int64_t(1) << 20));
}

bool aligned(const void* pointer, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0; }

// The grid-stride loop of the elementwise kernels, four elements a thread where the pointers allow
// (`vectorized`: quad(i) for elements 4i … 4i+3, 16-byte loads), then one at a time (one(i)) for
// the rest. A 4,096-token prefill's 40 M SwiGLU elements at one element a thread ran at ~2.1 TB/s.
template <typename Quad, typename One>
__device__ void for_each_element(std::int64_t count, bool vectorized, Quad quad, One one) {
  const std::int64_t first = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t quads = vectorized ? count / 4 : 0;
  for (std::int64_t i = first; i < quads; i += stride) quad(i);
  for (std::int64_t i = 4 * quads + first; i < count; i += stride) one(i);
}

// Blocks for for_each_element.
unsigned elementwise_blocks(std::int64_t count, bool vectorized) {
  return elementwise_blocks(vectorized ? (count + 3) / 4 : count);
}

// ---- embedding: one block per token ------------------------------------------------------------

// With next.scaled (one token), thread t also writes groups t, t + blockDim, … of the row for the
// next RMSNorm (carried_rms_norm.h): no barrier, each group is one thread's.
template <typename T>
__global__ void embedding_kernel(const T* table, const std::int32_t* ids, int hidden, float* out,
                                 const NextRmsNorm<T> next, const RopeRotationTable rotation) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  const std::int64_t token = blockIdx.x;
  if (rotation.out != nullptr) {  // n = 1: the one block makes the step's RoPE table
    const float position = float(*rotation.position);
    for (int i = threadIdx.x; i < rotation.half; i += blockDim.x)
      rotation.out[i] = device::rotation_at(position, rotation.inv_freq, i);
  }
  const T* row = table + std::int64_t(ids[token]) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[token * hidden + i] = to_float(row[i]);
  if (next.scaled == nullptr) return;
  for (int group = threadIdx.x; group < rms_norm_groups(hidden); group += blockDim.x) {
    const int first = group * kRmsNormGroup, count = min(kRmsNormGroup, hidden - first);
    float x[kRmsNormGroup], g[kRmsNormGroup];
#pragma unroll
    for (int i = 0; i < kRmsNormGroup; ++i) {  // all loads before the stores: one round trip
      x[i] = i < count ? to_float(row[first + i]) : 0.0f;
      g[i] = i < count ? to_float(next.norm_weight[first + i]) : 0.0f;
    }
    float squares = 0.0f;
#pragma unroll
    for (int i = 0; i < kRmsNormGroup; ++i) {
      squares += x[i] * x[i];
      if (i < count) next.scaled[first + i] = from_float<T>(g[i] * x[i]);
    }
    next.group_squares[group] = squares;
  }
}

// ---- RMSNorm: one block per row -------------------------------------------------------------------

// out = weight ⊙ (x · inverse_rms), inverse_rms = 1 / sqrt(Σx²/dim + eps), the CPU backend's
// order of operations. In place (out == x) is safe: block_sum's barrier separates every read of
// the first pass from the writes, and each thread rewrites only the elements it read itself.
template <typename T, typename OutT>
__global__ void rmsnorm_kernel(const float* x, const T* weight, int dim, float eps, OutT* out) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  const std::int64_t row = blockIdx.x;
  const float* in = x + row * dim;
  float sum_squares = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum_squares += in[i] * in[i];
  sum_squares = block_sum(sum_squares);
  const float inverse_rms = 1.0f / sqrtf(sum_squares / float(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x)
    out[row * dim + i] = from_float<OutT>(to_float(weight[i]) * (in[i] * inverse_rms));
}

// The same for rows of at most kRowQuads · 4 elements, a multiple of 4, with every pointer aligned
// for 4-element loads and stores (the prefill's layer norms: 4,096 rows of 2,560 for Qwen3-4B). A
// block of up to kRowThreads a row (fewer for short rows) holds the row in registers, its 16-byte
// loads all in flight before the one barrier. rmsnorm_kernel, one scalar element a thread and a
// second read of the row after its barrier, took 42.7 µs for those rows (63 MB: ~15 µs of bytes);
// with this kernel a 32K Qwen3-4B prefill runs 2.0% (swa) and 2.2% (Bifocal) faster on the H200
// (docs/notes/cuda-stop26-2026-12-03.md).
constexpr int kRowThreads = 128;
constexpr int kQuadsPerThread = 8;
constexpr int kRowQuads = kRowThreads * kQuadsPerThread;  // rows up to 4,096 elements

template <typename T, typename OutT>
__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_row_in_registers_kernel(const float* x, const T* weight, int dim, float eps, OutT* out) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  const std::int64_t row = blockIdx.x;
  const float4* in = reinterpret_cast<const float4*>(x + row * dim);
  const int quads = dim / 4;
  float4 v[kQuadsPerThread];
#pragma unroll
  for (int j = 0; j < kQuadsPerThread; ++j) {
    const int q = threadIdx.x + j * blockDim.x;
    v[j] = q < quads ? in[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float sum_squares = 0.0f;
#pragma unroll
  for (int j = 0; j < kQuadsPerThread; ++j)
    sum_squares += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  sum_squares = block_sum(sum_squares);  // its barrier orders every read before any write (in place)
  const float inverse_rms = 1.0f / sqrtf(sum_squares / float(dim) + eps);
#pragma unroll
  for (int j = 0; j < kQuadsPerThread; ++j) {
    const int q = threadIdx.x + j * blockDim.x;
    if (q >= quads) continue;
    const float4 g = device::load4(weight + 4 * q);
    device::store4(out + row * dim + 4 * q, make_float4(g.x * (v[j].x * inverse_rms), g.y * (v[j].y * inverse_rms),
                                                        g.z * (v[j].z * inverse_rms), g.w * (v[j].w * inverse_rms)));
  }
}

// ---- q/k RMSNorm + RoPE: one warp per head vector -------------------------------------------------

constexpr int kHeadsPerBlock = 8;  // warps per block; each stages its head vector in shared memory

// Block (token, y): heads 8y … 8y+7 of the token's query_heads + kv_heads (the query heads first),
// one warp each. The block makes RoPE's d/2 sines and cosines of the token once, for all its heads
// (made by every head they were most of the kernel's instructions: 69 µs for a 4,096-token Qwen3-4B
// prefill, 2.4 TB/s). The vector is staged in shared memory (normalised on the way) because RoPE
// pairs element i with i + d/2, which another lane holds when d/2 is not a multiple of 32 (head_dim
// 16, 24, 48).
template <typename T>
__global__ void qk_norm_rope_kernel(float* q, float* k, const T* q_norm, const T* k_norm, float eps,
                                    const std::int64_t* positions, const float* inv_freq, int query_heads, int kv_heads,
                                    int d, bool apply_rope, const float2* rotation_table, const float* keys_in,
                                    std::int64_t keys_in_stride) {
  extern __shared__ float staged_heads[];  // [kHeadsPerBlock, d], then the rotation [d/2] (sin, cos)
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  const int warp = threadIdx.x / kWarpSize;
  const std::int64_t token = blockIdx.x;
  const int head = blockIdx.y * kHeadsPerBlock + warp;
  const float position = apply_rope ? float(positions[token]) : 0.0f;
  float2* rotation = reinterpret_cast<float2*>(staged_heads + kHeadsPerBlock * d);
  if (apply_rope) {
    for (int i = threadIdx.x; i < d / 2; i += blockDim.x)
      rotation[i] = rotation_table != nullptr ? rotation_table[i] : device::rotation_at(position, inv_freq, i);
    __syncthreads();
  }
  if (head >= query_heads + kv_heads) return;  // the whole warp leaves together
  const bool is_query = head < query_heads;
  float* v = is_query ? q + (token * query_heads + head) * d : k + (token * kv_heads + head - query_heads) * d;
  // In place (norm_rope_head reads the whole vector before it writes), or a key from the wider
  // product it was made in.
  const float* in = !is_query && keys_in != nullptr ? keys_in + token * keys_in_stride + (head - query_heads) * d : v;
  device::norm_rope_head(in, staged_heads + warp * d, v, is_query ? q_norm : k_norm, eps, apply_rope, position,
                         inv_freq, d, 1.0f, rotation);
}

// ---- elementwise ---------------------------------------------------------------------------------

// silu(g)·u, as the CPU backend's swiglu.
__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Each element is read before it is written by the same thread, so out may be gate.
template <typename OutT>
__global__ void swiglu_kernel(const float* gate, const float* up, std::int64_t count, bool vectorized, OutT* out) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  for_each_element(
      count, vectorized,
      [&](std::int64_t i) {
        const float4 g = reinterpret_cast<const float4*>(gate)[i], u = reinterpret_cast<const float4*>(up)[i];
        device::store4(out + 4 * i, make_float4(silu_times(g.x, u.x), silu_times(g.y, u.y), silu_times(g.z, u.z),
                                                silu_times(g.w, u.w)));
      },
      [&](std::int64_t i) { out[i] = from_float<OutT>(silu_times(gate[i], up[i])); });
}

__global__ void add_residual_kernel(float* x, const float* y, std::int64_t count) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

template <typename T>
__global__ void add_bias_kernel(float* out, const T* bias, int cols, std::int64_t count) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] += to_float(bias[i % cols]);
}

// A 4,096-token window prefill's keys (4 M elements) at one element a thread: 21.6 µs, ~1.2 TB/s.
template <typename T>
__global__ void convert_kernel(const float* in, T* out, std::int64_t count, bool vectorized) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  for_each_element(
      count, vectorized,
      [&](std::int64_t i) { device::store4(out + 4 * i, reinterpret_cast<const float4*>(in)[i]); },
      [&](std::int64_t i) { out[i] = from_float<T>(in[i]); });
}

}  // namespace

template <typename T>
void embedding(const T* table, const std::int32_t* ids, int n, int hidden, float* out, cudaStream_t stream,
               const NextRmsNorm<T>& next, const RopeRotationTable& rotation) {
  if (n <= 0 || hidden <= 0) return;
  if (next.scaled != nullptr && (n != 1 || next.norm_weight == nullptr || next.group_squares == nullptr))
    fail("embedding", "the next RMSNorm's inputs are written for one token, with its weight and group sums");
  if (rotation.out != nullptr && (n != 1 || rotation.position == nullptr || rotation.inv_freq == nullptr ||
                                  rotation.half <= 0))
    fail("embedding", "the RoPE table is made for one token, with its position, frequencies and half the head size");
  launch_dependent(embedding_kernel<T>, dim3(n), dim3(threads_for_row(hidden)), 0, stream, "embedding_kernel", table,
                   ids, hidden, out, next, rotation);
}

template <typename T, typename OutT>
void rmsnorm(const float* x, const T* weight, int rows, int dim, float eps, OutT* out, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  const bool in_registers = dim % 4 == 0 && dim <= 4 * kRowQuads && aligned(x, 16) &&
                            aligned(weight, 4 * sizeof(T)) && aligned(out, 4 * sizeof(OutT));
  if (in_registers) {
    const int threads = std::min(kRowThreads, round_up(dim / 4, kWarpSize));  // quads ≤ threads · kQuadsPerThread
    launch_dependent(rmsnorm_row_in_registers_kernel<T, OutT>, dim3(rows), dim3(threads), 0, stream,
                     "rmsnorm_row_in_registers_kernel", x, weight, dim, eps, out);
    return;
  }
  launch_dependent(rmsnorm_kernel<T, OutT>, dim3(rows), dim3(threads_for_row(dim)), 0, stream, "rmsnorm_kernel", x,
                   weight, dim, eps, out);
}

template <typename T>
void qk_norm_rope(float* q, float* k, const T* q_norm, const T* k_norm, float eps, const std::int64_t* positions,
                  const float* inv_freq, int n, int query_heads, int kv_heads, int head_dim, bool apply_rope,
                  cudaStream_t stream, const float2* rotation, const float* keys_in, std::int64_t keys_in_stride) {
  if (head_dim % 2 != 0 || head_dim > kMaxHeadDim) fail("qk_norm_rope", "head_dim must be even and at most 512");
  if (keys_in != nullptr && keys_in_stride < std::int64_t(kv_heads) * head_dim)
    fail("qk_norm_rope", "keys read from a product of " + std::to_string(keys_in_stride) +
                             " columns a token, fewer than the " + std::to_string(kv_heads * head_dim) + " of its keys");
  const bool anything_to_do = apply_rope || q_norm != nullptr || k_norm != nullptr || keys_in != nullptr;
  if (!anything_to_do || n <= 0 || query_heads + kv_heads <= 0) return;
  if (rotation != nullptr && n != 1)
    fail("qk_norm_rope", "the RoPE table holds one token's angles, not " + std::to_string(n));
  const dim3 blocks(unsigned(n), unsigned((query_heads + kv_heads + kHeadsPerBlock - 1) / kHeadsPerBlock));
  const std::size_t shared_bytes = std::size_t(kHeadsPerBlock) * head_dim * sizeof(float) + head_dim / 2 * sizeof(float2);
  launch_dependent(qk_norm_rope_kernel<T>, blocks, dim3(kHeadsPerBlock * kWarpSize), shared_bytes, stream,
                   "qk_norm_rope_kernel", q, k, q_norm, k_norm, eps, positions, inv_freq, query_heads, kv_heads,
                   head_dim, apply_rope, rotation, keys_in, keys_in_stride);
}

template <typename OutT>
void swiglu(const float* gate, const float* up, std::int64_t count, OutT* out, cudaStream_t stream) {
  if (count <= 0) return;
  const bool vectorized = aligned(gate, 16) && aligned(up, 16) && aligned(out, 4 * sizeof(OutT));
  launch_dependent(swiglu_kernel<OutT>, dim3(elementwise_blocks(count, vectorized)), dim3(kElementwiseThreads), 0,
                   stream, "swiglu_kernel", gate, up, count, vectorized, out);
}

void add_residual(float* x, const float* y, std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  launch_dependent(add_residual_kernel, dim3(elementwise_blocks(count)), dim3(kElementwiseThreads), 0, stream,
                   "add_residual_kernel", x, y, count);
}

template <typename T>
void add_bias(float* out, const T* bias, int rows, int cols, cudaStream_t stream) {
  const std::int64_t count = std::int64_t(rows) * cols;
  if (count <= 0) return;
  launch_dependent(add_bias_kernel<T>, dim3(elementwise_blocks(count)), dim3(kElementwiseThreads), 0, stream,
                   "add_bias_kernel", out, bias, cols, count);
}

template <typename T>
void convert(const float* in, T* out, std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const bool vectorized = aligned(in, 16) && aligned(out, 4 * sizeof(T));
  launch_dependent(convert_kernel<T>, dim3(elementwise_blocks(count, vectorized)), dim3(kElementwiseThreads), 0, stream,
                   "convert_kernel", in, out, count, vectorized);
}

// The storage types: bf16 weights (the real models), fp16 (`--dtype fp16`) and fp32 (the
// `--dtype fp32` test path).
template void embedding(const __nv_bfloat16*, const std::int32_t*, int, int, float*, cudaStream_t,
                        const NextRmsNorm<__nv_bfloat16>&, const RopeRotationTable&);
template void embedding(const float*, const std::int32_t*, int, int, float*, cudaStream_t,
                        const NextRmsNorm<float>&, const RopeRotationTable&);
template void rmsnorm(const float*, const __nv_bfloat16*, int, int, float, float*, cudaStream_t);
template void rmsnorm(const float*, const __nv_bfloat16*, int, int, float, __nv_bfloat16*, cudaStream_t);
template void rmsnorm(const float*, const float*, int, int, float, float*, cudaStream_t);
template void rmsnorm(const float*, const float*, int, int, float, __nv_bfloat16*, cudaStream_t);
template void qk_norm_rope(float*, float*, const __nv_bfloat16*, const __nv_bfloat16*, float, const std::int64_t*,
                           const float*, int, int, int, int, bool, cudaStream_t, const float2*, const float*,
                           std::int64_t);
template void qk_norm_rope(float*, float*, const float*, const float*, float, const std::int64_t*, const float*, int,
                           int, int, int, bool, cudaStream_t, const float2*, const float*,
                           std::int64_t);
template void swiglu(const float*, const float*, std::int64_t, float*, cudaStream_t);
template void swiglu(const float*, const float*, std::int64_t, __nv_bfloat16*, cudaStream_t);
template void add_bias(float*, const __nv_bfloat16*, int, int, cudaStream_t);
template void add_bias(float*, const float*, int, int, cudaStream_t);
template void convert(const float*, __nv_bfloat16*, std::int64_t, cudaStream_t);
template void convert(const float*, float*, std::int64_t, cudaStream_t);
template void embedding(const __half*, const std::int32_t*, int, int, float*, cudaStream_t,
                        const NextRmsNorm<__half>&, const RopeRotationTable&);
template void rmsnorm(const float*, const __half*, int, int, float, float*, cudaStream_t);
template void rmsnorm(const float*, const __half*, int, int, float, __half*, cudaStream_t);
template void qk_norm_rope(float*, float*, const __half*, const __half*, float, const std::int64_t*, const float*, int,
                           int, int, int, bool, cudaStream_t, const float2*, const float*,
                           std::int64_t);
template void swiglu(const float*, const float*, std::int64_t, __half*, cudaStream_t);
template void add_bias(float*, const __half*, int, int, cudaStream_t);
template void convert(const float*, __half*, std::int64_t, cudaStream_t);

}  // namespace bifocal::cuda
