// Device-side building blocks of the recurrent mixers' kernels (recurrent_decode.cu,
// recurrent_prefill.cu, recurrent_chunkwise.cu, mlstm_decode.cu): the mLSTM gate arithmetic, the feature maps φ of
// linear attention, and the pass that updates a slice of a d_k × d_v state matrix and reads it
// with a few query vectors. DEVICE CODE: include from .cu files only (the launch APIs are in the
// plain-C++ headers recurrent_decode.cuh, recurrent_prefill.cuh, recurrent_chunkwise.cuh).
//
// Every block of these kernels has kRecurrentThreads threads.
#pragma once

#ifndef __CUDACC__
#error "recurrent_device.cuh holds device code: include it from .cu files only"
#endif

#include <cuda_runtime.h>

#include "backend/cuda/device_math.cuh"

#include <cmath>
#include <cstddef>

namespace bifocal::cuda::device {

inline constexpr int kRecurrentThreads = 256;
inline constexpr int kWarps = kRecurrentThreads / 32;
// Query heads whose numerators one state pass keeps in registers; more readers take more passes.
inline constexpr int kMaxReaders = 8;
// Rows of the state each thread loads before it computes: that many 16-byte loads in flight.
inline constexpr int kStateRowsInFlight = 4;
// Width of one hedgehog softmax (cpu::kHedgehogWidth): φ(x) = [softmax(xW), softmax(−xW)].
inline constexpr int kHedgehogWidth = 64;

// Shared memory is carved into float arrays whose sizes are rounded up to 4 floats, so that every
// array starts 16-byte aligned and can be read as float4. A kernel's layout is one struct built
// with SharedCarve on both sides: the host sizes the launch with it, the kernel finds its arrays.
__host__ __device__ constexpr int padded(int floats) { return (floats + 3) / 4 * 4; }

struct SharedCarve {
  int used = 0;  // floats
  __host__ __device__ constexpr int take(int floats) {
    const int at = used;
    used += padded(floats);
    return at;
  }
  __host__ __device__ constexpr std::size_t bytes() const { return std::size_t(used) * sizeof(float); }
};


// γ = sigmoid(x) in the form that neither overflows nor cancels (cpu/lolcats.cpp).
__device__ inline float stable_sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}

// ---------------------------------------------------------------------------------------------
// mLSTM gates (DESIGN.md mlstm). The chunkwise prefill computes them in double exactly as
// cpu/mlstm.cpp does (its cumulative log forget gate b_τ must keep full precision over a chunk);
// the decode step in fp32 (mlstm_step).

struct MlstmLogGates {
  double input;       // ĩ = 15·tanh(i_raw/15)
  double log_forget;  // logf = logsigmoid(15·tanh(f_raw/15))
};

__device__ inline MlstmLogGates mlstm_log_gates(float input_raw, float forget_raw) {
  const double input = 15.0 * tanh(double(input_raw) / 15.0);
  const double forget = 15.0 * tanh(double(forget_raw) / 15.0);
  // logsigmoid(x) = min(x, 0) − log1p(exp(−|x|)): exp never sees a positive argument.
  return {input, fmin(forget, 0.0) - log1p(exp(-fabs(forget)))};
}

// m_t = max(logf + m_{t−1}, ĩ), rounded to fp32 as the state stores it.
__device__ inline float mlstm_next_stabilizer(float previous, MlstmLogGates gates) {
  return float(fmax(gates.log_forget + double(previous), gates.input));
}

// One recurrent step's weights: f′ = exp(logf + m_{t−1} − m_t), i′ = exp(ĩ − m_t).
struct MlstmStep {
  float stabilizer;     // m_t
  float forget_weight;  // f′
  float input_weight;   // i′
};

// The decode step's gates in fp32: they sit at the head of every decode kernel's critical path,
// where the double-precision transcendentals of mlstm_log_gates cost ~1 µs of one thread. m_t
// then agrees with the CPU's to an ulp or two (the prefill keeps double: it sums logf over a chunk).
__device__ inline MlstmStep mlstm_step(float input_raw, float forget_raw, float previous) {
  const float input = 15.0f * tanhf(input_raw / 15.0f);
  const float forget = 15.0f * tanhf(forget_raw / 15.0f);
  const float log_forget = fminf(forget, 0.0f) - log1pf(expf(-fabsf(forget)));
  const float next = fmaxf(log_forget + previous, input);
  // The difference of the stored fp32 stabilizers is taken first (cpu/mlstm.cpp says why).
  return {next, expf(log_forget + (previous - next)), expf(input - next)};
}

// DESIGN.md: h = q̂ᵀC / (max(|q̂ᵀn|, exp(−m)) + 1e-6); this is the denominator.
__device__ inline float mlstm_denominator(float query_dot_normalizer, float stabilizer) {
  return fmaxf(fabsf(query_dot_normalizer), expf(-stabilizer)) + 1e-6f;
}

// ---------------------------------------------------------------------------------------------
// Feature maps of linear attention (DESIGN.md linear; cpu::linear_feature_map).

// Kernel-side view of cpu::LinearShape (whose member functions are host code).
struct LinearDims {
  int query_heads, kv_heads, head_dim, feature_dim;  // feature_dim f: d for elu1, 128 for hedgehog
  bool hedgehog;
};

// The KV head's hedgehog W [d, 64] inside feature_map.weight [Hkv, d, 64]; nullptr for elu1.
__host__ __device__ inline const float* hedgehog_slice(const LinearDims& dims, const float* hedgehog_weight, int kv) {
  return dims.hedgehog ? hedgehog_weight + std::size_t(kv) * dims.head_dim * kHedgehogWidth : nullptr;
}

// elu(x) + 1 = x + 1 for x > 0, e^x otherwise.
__device__ inline float elu1(float x) { return x > 0.0f ? x + 1.0f : expf(x); }

// phi[r][0 … f) = φ(x[r][0 … d)) for the `count` rows of x; x and phi in shared memory (phi rows f
// floats apart). hedgehog_weight: the KV head's W [d, 64] (global memory), or nullptr for elu1
// (f = d). hedgehog: φ(x) = [softmax(xW), softmax(−xW)] (f = 128), each softmax shifted by its
// own extreme so large logits stay finite. Ends with __syncthreads().
__device__ inline void feature_map_rows(const float* x, int count, int d, const float* hedgehog_weight, float* phi) {
  if (hedgehog_weight == nullptr) {
    for (int i = threadIdx.x; i < count * d; i += blockDim.x) phi[i] = elu1(x[i]);
    __syncthreads();
    return;
  }
  constexpr int width = kHedgehogWidth, f = 2 * kHedgehogWidth;
  // Logits xW (summed over i in order, as the CPU does) parked in the second half of each φ row.
  for (int item = threadIdx.x; item < count * width; item += blockDim.x) {
    const int r = item / width, c = item % width;
    const float* row = x + r * d;
    float logit = 0.0f;
    for (int i = 0; i < d; ++i) logit += row[i] * hedgehog_weight[i * width + c];
    phi[r * f + width + c] = logit;
  }
  __syncthreads();
  // One warp per row; lane holds logits c = lane and lane + 32.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < count; r += blockDim.x / 32) {
    float* row = phi + r * f;
    const float l0 = row[width + lane], l1 = row[width + lane + 32];
    const float highest = warp_max(fmaxf(l0, l1)), lowest = warp_min(fminf(l0, l1));
    const float p0 = expf(l0 - highest), p1 = expf(l1 - highest);  // softmax(xW)
    const float n0 = expf(lowest - l0), n1 = expf(lowest - l1);    // softmax(−xW): its max is −min
    const float positive_sum = warp_sum(p0 + p1), negative_sum = warp_sum(n0 + n1);
    __syncwarp();  // every lane has read its logits before the row is overwritten
    row[lane] = p0 / positive_sum;
    row[lane + 32] = p1 / positive_sum;
    row[width + lane] = n0 / negative_sum;
    row[width + lane + 32] = n1 / negative_sum;
  }
  __syncthreads();
}

// ---------------------------------------------------------------------------------------------
// The state pass: the bytes that matter in every recurrent decode step.
//
// One block owns the columns [col_begin, col_begin + col_count) of a rows × row_stride fp32
// matrix M in global memory (M[a][b] at matrix[a·row_stride + b]); col_count is a multiple of 4.
//   update (when `update`):  M[a][b] ← decay · M[a][b] + key_weight[a] · value[b]
//   read:                    numerators[g][b − col_begin] = Σ_a reader[g][a] · M[a][b]   (updated M)
// for the reader vectors g < reader_count (reader[g] at readers + g·reader_stride). key_weight
// [rows], value [row_stride] and the readers are in shared memory; numerators [reader_count,
// col_count] too; scratch: state_pass_scratch_floats(col_count) floats of shared memory.
//
// Threads: thread → (quad of 4 columns, lane); consecutive threads cover a row's slice (16-byte
// coalesced loads), the lanes stride over the rows with kStateRowsInFlight loads in flight each.
// The lanes' partial numerators are summed by xor shuffles inside each warp (when the quads per
// row are a power of two ≤ 32, so that a warp holds whole lanes) and then across the warps in
// shared memory, all readers at once; otherwise one reader at a time through shared memory.
// Each element of M is read once and written once. More than kMaxReaders readers take several
// passes; a later pass re-reads the rows its own thread wrote (program order makes them visible)
// and writes nothing. Ends with __syncthreads().
__host__ __device__ constexpr bool state_pass_shuffles(int col_count) {
  const int quads = col_count / 4;
  return quads <= 32 && (quads & (quads - 1)) == 0;
}
__host__ __device__ constexpr int state_pass_scratch_floats(int col_count) {
  const int per_reader = kRecurrentThreads * 4;
  const int by_warps = kWarps * kMaxReaders * col_count;
  return state_pass_shuffles(col_count) && by_warps > per_reader ? by_warps : per_reader;
}

// Asks L2 for this block's slice of the state early (one line per row), so that a pass that runs
// after other memory-bound work finds it there instead of waiting on HBM.
__device__ inline void prefetch_state_columns(const float* matrix, int rows, int row_stride, int col_begin) {
  for (int a = threadIdx.x; a < rows; a += blockDim.x)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(matrix + std::size_t(a) * row_stride + col_begin));
}

__device__ inline void state_columns_pass(float* matrix, int rows, int row_stride, int col_begin, int col_count,
                                          bool update, float decay, const float* key_weight, const float* value,
                                          const float* readers, int reader_stride, int reader_count,
                                          float* numerators, float* scratch) {
  const int quads = col_count / 4;
  const int lanes = blockDim.x / quads;
  const int quad = threadIdx.x % quads, lane = threadIdx.x / quads;
  const bool active = lane < lanes;
  const bool shuffles = state_pass_shuffles(col_count);
  const int column = col_begin + quad * 4;
  const float4 v = active ? *reinterpret_cast<const float4*>(value + column) : make_float4(0, 0, 0, 0);

  for (int first = 0; first < reader_count; first += kMaxReaders) {
    const int heads = min(kMaxReaders, reader_count - first);
    const bool write = update && first == 0;
    float acc[kMaxReaders][4] = {};
    if (active) {
      for (int a0 = lane; a0 < rows; a0 += lanes * kStateRowsInFlight) {
        float4 m[kStateRowsInFlight];
        #pragma unroll
        for (int u = 0; u < kStateRowsInFlight; ++u) {
          const int a = a0 + u * lanes;
          if (a < rows) m[u] = *reinterpret_cast<const float4*>(matrix + std::size_t(a) * row_stride + column);
        }
        #pragma unroll
        for (int u = 0; u < kStateRowsInFlight; ++u) {
          const int a = a0 + u * lanes;
          if (a >= rows) continue;
          if (write) {
            const float kw = key_weight[a];
            m[u].x = fmaf(decay, m[u].x, kw * v.x);
            m[u].y = fmaf(decay, m[u].y, kw * v.y);
            m[u].z = fmaf(decay, m[u].z, kw * v.z);
            m[u].w = fmaf(decay, m[u].w, kw * v.w);
            *reinterpret_cast<float4*>(matrix + std::size_t(a) * row_stride + column) = m[u];
          }
          #pragma unroll
          for (int g = 0; g < kMaxReaders; ++g) {
            if (g >= heads) break;
            const float r = readers[(first + g) * reader_stride + a];
            acc[g][0] = fmaf(r, m[u].x, acc[g][0]);
            acc[g][1] = fmaf(r, m[u].y, acc[g][1]);
            acc[g][2] = fmaf(r, m[u].z, acc[g][2]);
            acc[g][3] = fmaf(r, m[u].w, acc[g][3]);
          }
        }
      }
    }

    if (shuffles) {
      // Σ over the lanes of a warp (they are `quads` threads apart), then over the warps.
      const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
      #pragma unroll
      for (int g = 0; g < kMaxReaders; ++g) {
        if (g >= heads) break;
        #pragma unroll
        for (int e = 0; e < 4; ++e)
          for (int offset = quads; offset < 32; offset *= 2)
            acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], offset);
        if (threadIdx.x % 32 < quads)
          *reinterpret_cast<float4*>(scratch + (warp * kMaxReaders + g) * col_count + quad * 4) =
              make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
      }
      __syncthreads();
      for (int item = threadIdx.x; item < heads * col_count; item += blockDim.x) {
        const int g = item / col_count, c = item % col_count;
        float sum = 0.0f;
        for (int w = 0; w < warps; ++w) sum += scratch[(w * kMaxReaders + g) * col_count + c];
        numerators[(first + g) * col_count + c] = sum;
      }
      __syncthreads();
      continue;
    }
    // Σ over the lanes, one reader at a time through scratch [lanes, col_count].
    #pragma unroll
    for (int g = 0; g < kMaxReaders; ++g) {
      if (g >= heads) break;
      if (active)
        *reinterpret_cast<float4*>(scratch + lane * col_count + quad * 4) =
            make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
      __syncthreads();
      for (int c = threadIdx.x; c < col_count; c += blockDim.x) {
        float sum = 0.0f;
        for (int l = 0; l < lanes; ++l) sum += scratch[l * col_count + c];
        numerators[(first + g) * col_count + c] = sum;
      }
      __syncthreads();
    }
  }
}

}  // namespace bifocal::cuda::device
