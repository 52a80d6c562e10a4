// The chunkwise prefill kernel of linear attention and LoLCATs (contract and math in
// recurrent_chunkwise.cuh; the mLSTM prefill, parallel over chunks, is mlstm_prefill.cu).
//
// Block (rank, kv) owns the columns [rank·d/ranks, …) of KV head kv's state for the whole sequence;
// the L×L scores are recomputed by every block of the cluster (the price of not exchanging them).
// Per chunk: L²·f (scores, 4×4 register tiles) + L·f·columns (entering state) + L²·columns
// (intra-chunk values) + L·f·columns (state update) multiply-adds on CUDA cores, from shared
// memory; the only global traffic is φ(q), φ(k), v and the outputs.
#include "backend/cuda/recurrent_chunkwise.cuh"

#include <cooperative_groups.h>

#include <cmath>
#include <cstddef>

#include "backend/cpu/linear_attention.h"
#include "backend/cuda/cluster_launch.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_properties.h"
#include "backend/cuda/recurrent_device.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

namespace cg = cooperative_groups;
using device::kRecurrentThreads;

// Transposed [f, L] tiles are stored with rows of L + 4 floats: float4-aligned, and the loads
// that fill them (consecutive rows, one column) spread over 8 banks instead of one.
constexpr int transposed_stride(int chunk) { return chunk + 4; }

struct ChunkwiseLayout {
  int row_denominator, normalizer;
  int state, weights, scores, keys_t, queries_t, values;
  device::SharedCarve carve;
  __host__ __device__ ChunkwiseLayout(int chunk, int f, int columns) {
    row_denominator = carve.take(chunk);            // the output divisor of row τ [L]
    normalizer = carve.take(f);                     // n (z), carried across chunks [f]
    state = carve.take(f * columns);                // S, this block's columns, carried [f, columns]
    weights = carve.take(chunk * chunk);            // W_τj [L, L]
    scores = carve.take(chunk * chunk);             // S_τj of the current query head [L, L]
    keys_t = carve.take(f * transposed_stride(chunk));     // k_j[a] at [a, j]
    queries_t = carve.take(f * transposed_stride(chunk));  // q_τ[a] at [a, τ], current head
    values = carve.take(chunk * columns);           // v_j of this block's columns [L, columns]
  }
};

// tile[a·stride + j] = source(j, a) for j < count, a < f: rows of a [count, f] matrix
// (read coalesced along a) stored transposed, 8 loads in flight per thread.
template <typename Source>
__device__ void load_transposed(const Source& source, int count, int f, float* tile, int stride) {
  constexpr int kInFlight = 8;
  for (int base = threadIdx.x; base < count * f; base += blockDim.x * kInFlight) {
    float x[kInFlight];
    #pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int item = base + u * blockDim.x;
      x[u] = item < count * f ? source(item / f, item % f) : 0.0f;
    }
    #pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int item = base + u * blockDim.x;
      if (item < count * f) tile[(item % f) * stride + item / f] = x[u];
    }
  }
}

// Block (rank, kv): KV head kv, columns [rank·d/ranks, …) of its state; the whole sequence.
// The block's slice of S stays in shared memory from the first chunk to the last.
template <ChunkwiseNormalisation kNormalise>
__global__ void __launch_bounds__(kRecurrentThreads) chunkwise_kernel(ChunkwiseArgs a) {
  const cg::cluster_group cluster = cg::this_cluster();
  const int kv = blockIdx.y, f = a.feature_dim, d = a.head_dim, L = a.chunk, LT = transposed_stride(a.chunk);
  const int readers = a.query_heads / a.kv_heads, first_query = kv * readers;
  const int ranks = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int columns = d / ranks, col_begin = rank * columns, quads = columns / 4;

  const ChunkwiseLayout layout(L, f, columns);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  float* row_denominator = shared + layout.row_denominator;
  float* normalizer = shared + layout.normalizer;
  float* state = shared + layout.state;
  float* weights = shared + layout.weights;
  float* scores = shared + layout.scores;
  float* keys_t = shared + layout.keys_t;
  float* queries_t = shared + layout.queries_t;
  float* values = shared + layout.values;
  float* matrix = a.matrix + std::size_t(kv) * f * d;

  // The inputs and the entering state come from earlier kernels (a programmatic dependent
  // launch, cluster_launch.h).
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();

  // The entering state: this block's columns of S, and z (which block 0 overwrites at the end,
  // after the barrier that follows every block's read).
  for (int item = threadIdx.x; item < f * quads; item += blockDim.x) {
    const int i = item / quads, quad = item % quads;
    *reinterpret_cast<float4*>(state + i * columns + 4 * quad) =
        *reinterpret_cast<const float4*>(matrix + std::size_t(i) * d + col_begin + 4 * quad);
  }
  for (int i = threadIdx.x; i < f; i += blockDim.x) normalizer[i] = a.normalizer[std::size_t(kv) * f + i];
  int first_key = 0;  // LoLCATs: token i's leaving key t − w exists once t = start + i ≥ w
  if (a.tokens_seen != nullptr)
    first_key = int(min(max(std::int64_t(a.window) - *a.tokens_seen, std::int64_t(0)), std::int64_t(a.n)));
  cluster.sync();

  for (int chunk_start = 0; chunk_start < a.n; chunk_start += L) {
    const int count = min(L, a.n - chunk_start);

    // (a) The chunk's keys (transposed) and this block's value columns.
    const auto key_at = [&](int j, int i) {
      return a.key_features[(std::size_t(chunk_start + j) * a.kv_heads + kv) * f + i];
    };
    load_transposed(key_at, count, f, keys_t, LT);
    for (int item = threadIdx.x; item < count * quads; item += blockDim.x) {
      const int j = item / quads, quad = item % quads;
      *reinterpret_cast<float4*>(values + j * columns + 4 * quad) = *reinterpret_cast<const float4*>(
          a.values + (std::size_t(chunk_start + j) * a.kv_heads + kv) * d + col_begin + 4 * quad);
    }
    __syncthreads();

    // (b) The causal mask W_τj: 1 on and below the diagonal, 0 above it, past the chunk, and before
    //     LoLCATs' first key.
    for (int item = threadIdx.x; item < L * L; item += blockDim.x) {
      const int row = item / L, j = item % L;
      weights[item] = j <= row && row < count && chunk_start + j >= first_key ? 1.0f : 0.0f;
    }
    __syncthreads();

    // (c) The outputs, one query head at a time.
    for (int g = 0; g < readers; ++g) {
      const int head = first_query + g;
      const auto query_at = [&](int row, int i) {
        return a.query_features[(std::size_t(chunk_start + row) * a.query_heads + head) * f + i];
      };
      load_transposed(query_at, count, f, queries_t, LT);
      __syncthreads();

      // Scores S_τj = (q_τ·k_j)·W_τj in 4×4 register tiles on and below the diagonal.
      const int tiles = (count + 3) / 4;
      for (int tile = threadIdx.x; tile < tiles * tiles; tile += blockDim.x) {
        const int row_tile = tile / tiles, key_tile = tile % tiles;
        if (key_tile > row_tile) continue;
        float dot[4][4] = {};
        for (int i = 0; i < f; ++i) {
          const float4 q4 = *reinterpret_cast<const float4*>(queries_t + i * LT + 4 * row_tile);
          const float4 k4 = *reinterpret_cast<const float4*>(keys_t + i * LT + 4 * key_tile);
          const float qs[4] = {q4.x, q4.y, q4.z, q4.w}, ks[4] = {k4.x, k4.y, k4.z, k4.w};
          #pragma unroll
          for (int r = 0; r < 4; ++r)
            #pragma unroll
            for (int c = 0; c < 4; ++c) dot[r][c] = fmaf(qs[r], ks[c], dot[r][c]);
        }
        #pragma unroll
        for (int r = 0; r < 4; ++r)
          #pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int row = 4 * row_tile + r, j = 4 * key_tile + c;
            if (row < count && j <= row) scores[row * L + j] = dot[r][c] * weights[row * L + j];
          }
      }
      __syncthreads();

      // φ(q)·z_τ = φ(q_τ)ᵀz_0 + Σ_j S_τj and the divisor of row τ: four lanes per row (L ≤ 64).
      {
        const int row = threadIdx.x / 4, part = threadIdx.x % 4;
        float dot = 0.0f, intra = 0.0f;
        if (row < count) {
          for (int i = part; i < f; i += 4) dot = fmaf(queries_t[i * LT + row], normalizer[i], dot);
          for (int j = part; j <= row; j += 4) intra += scores[row * L + j];
        }
        for (int offset = 1; offset < 4; offset *= 2) {
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
          intra += __shfl_xor_sync(0xffffffffu, intra, offset);
        }
        if (row < count && part == 0) {
          const float query_dot_normalizer = dot + intra;
          if constexpr (kNormalise == ChunkwiseNormalisation::Linear) {
            row_denominator[row] = query_dot_normalizer + cpu::kLinearEps;
          } else {
            row_denominator[row] = 1.0f;
            if (rank == 0)
              a.denominators[std::size_t(chunk_start + row) * a.query_heads + head] = query_dot_normalizer;
          }
        }
      }
      __syncthreads();

      // h_τ = φ(q_τ)ᵀS_0 + Σ_j S_τj v_j for this block's columns, 4 at a time.
      for (int item = threadIdx.x; item < count * quads; item += blockDim.x) {
        const int row = item / quads, quad = item % quads;
        float4 h = make_float4(0, 0, 0, 0);
        for (int i = 0; i < f; ++i) {
          const float qi = queries_t[i * LT + row];
          const float4 c4 = *reinterpret_cast<const float4*>(state + i * columns + 4 * quad);
          h.x = fmaf(qi, c4.x, h.x), h.y = fmaf(qi, c4.y, h.y), h.z = fmaf(qi, c4.z, h.z), h.w = fmaf(qi, c4.w, h.w);
        }
        for (int j = 0; j <= row; ++j) {
          const float score = scores[row * L + j];
          const float4 v4 = *reinterpret_cast<const float4*>(values + j * columns + 4 * quad);
          h.x = fmaf(score, v4.x, h.x), h.y = fmaf(score, v4.y, h.y), h.z = fmaf(score, v4.z, h.z),
          h.w = fmaf(score, v4.w, h.w);
        }
        const float divisor = row_denominator[row];
        h.x /= divisor, h.y /= divisor, h.z /= divisor, h.w /= divisor;
        *reinterpret_cast<float4*>(a.out + (std::size_t(chunk_start + row) * a.query_heads + head) * d + col_begin +
                                   4 * quad) = h;
      }
      __syncthreads();  // queries_t is refilled for the next head
    }

    // (d) The state leaving the chunk: row L−1 of the same mask.
    const float* last_weights = weights + (count - 1) * L;
    for (int item = threadIdx.x; item < f * quads; item += blockDim.x) {
      const int i = item / quads, quad = item % quads;
      float4* cell = reinterpret_cast<float4*>(state + i * columns + 4 * quad);
      float4 c4 = *cell;
      for (int j = 0; j < count; ++j) {
        const float key_weight = last_weights[j] * keys_t[i * LT + j];
        const float4 v4 = *reinterpret_cast<const float4*>(values + j * columns + 4 * quad);
        c4.x = fmaf(key_weight, v4.x, c4.x), c4.y = fmaf(key_weight, v4.y, c4.y), c4.z = fmaf(key_weight, v4.z, c4.z),
        c4.w = fmaf(key_weight, v4.w, c4.w);
      }
      *cell = c4;
    }
    for (int i = threadIdx.x; i < f; i += blockDim.x) {
      float n_i = normalizer[i];
      for (int j = 0; j < count; ++j) n_i = fmaf(last_weights[j], keys_t[i * LT + j], n_i);
      normalizer[i] = n_i;
    }
    __syncthreads();
  }

  for (int item = threadIdx.x; item < f * quads; item += blockDim.x) {
    const int i = item / quads, quad = item % quads;
    *reinterpret_cast<float4*>(matrix + std::size_t(i) * d + col_begin + 4 * quad) =
        *reinterpret_cast<const float4*>(state + i * columns + 4 * quad);
  }
  if (rank == 0)
    for (int i = threadIdx.x; i < f; i += blockDim.x) a.normalizer[std::size_t(kv) * f + i] = normalizer[i];
}

// The largest chunk (64 or 32 tokens) whose tiles fit in a block's shared memory.
int chunk_length(int f, int columns) {
  const int limit = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  for (int chunk : {64, 32, 16})
    if (ChunkwiseLayout(chunk, f, columns).carve.bytes() <= std::size_t(limit)) return chunk;
  fail("chunkwise prefill", "no chunk length fits in shared memory");
}

// The most blocks per state (≤ 8): their slices of C then always fit in shared memory, and the
// sequential chunk loop, which is the latency that matters, gets the least work per block.
template <ChunkwiseNormalisation kNormalise>
void launch(ChunkwiseArgs args, cudaStream_t stream) {
  if (args.n <= 0) return;
  const int ranks = cluster_ranks(args.head_dim, 1);
  args.chunk = chunk_length(args.feature_dim, args.head_dim / ranks);
  const ChunkwiseLayout layout(args.chunk, args.feature_dim, args.head_dim / ranks);
  launch_in_clusters(chunkwise_kernel<kNormalise>, dim3(ranks, args.kv_heads), kRecurrentThreads, ranks,
                     layout.carve.bytes(), stream, "chunkwise_kernel", args);
}

}  // namespace

void launch_chunkwise(ChunkwiseNormalisation normalise, ChunkwiseArgs args, cudaStream_t stream) {
  switch (normalise) {
    case ChunkwiseNormalisation::Linear: return launch<ChunkwiseNormalisation::Linear>(args, stream);
    case ChunkwiseNormalisation::Unnormalised: return launch<ChunkwiseNormalisation::Unnormalised>(args, stream);
  }
}

}  // namespace bifocal::cuda
