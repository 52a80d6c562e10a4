// Decode attention (one query token over the KV cache), flash-decoding style: the long-cache
// split kernel and the dispatch of both paths. Contracts in attention_decode.cuh.
//
// The math (DESIGN.md "full", "swa", learned sink): for query head h at position p,
//   o = Σ_j e^{s_j − m} v_j / (Σ_j e^{s_j − m} + e^{S_h − m}),  s_j = q·k_j / √d,
// over the visible slots j, m the max logit. Logits are kept in base 2 (q is pre-multiplied by
// log2(e)/√d) so each weight is one exp2f; the learned sink is converted likewise.
//
// ---- Cost model (H200: 132 SMs, ~1.98 GHz, 4.25 TB/s copy; Qwen3-4B: Hq 32, Hkv 8, d 128) ----
// A slot-head (one slot of one KV head) is 2·d·2 = 512 bytes of bf16 key + value. At 4 TB/s an
// SM must take one every 34 clocks: 134 warp-instruction issue slots (4 schedulers).
// The previous kernel (2.27 TB/s at 256K slots) lost on every count:
//  * issue: 16 lanes per key row; per slot-head 16 + 16 FMA (q·k, p·v, 4 heads), 8 SHFL + 8 FADD
//    (4 butterfly steps per head per key), 8 bf16 unpacks, 2.5 exp2 (every lane of a key group
//    computed all weights), ~20 of int64 index, slot_positions and mask math: ~75, 56% of issue;
//  * in flight: 134 registers → 12 warps per SM, 4 slots × (k, v) × 16 B per lane: ≤ 48 KiB per
//    SM and only while a warp waits (it loaded, waited, then computed with nothing in flight),
//    where 4 TB/s at a loaded latency of ~1–1.5 µs needs 30–45 KiB in flight all the time;
//  * waves: 2048 blocks over 396 resident = 5.2 waves, the last 17% full (~14% lost).
// This kernel, bf16 cache (fp16 the same, with fp16 parts and mma):
//  * tensor cores: per 16-slot tile and KV head S = K·Q (mma M = 16 slots, N = 8 query heads of
//    the group, padded) and Oᵀ += Vᵀ·Pᵀ (M = 16 columns of d), mma.sync m16n8k16, operands by
//    ldmatrix(.trans) from shared memory. No dot product is reduced with shuffles. fp32 accuracy:
//    q = q₁ + q₂ + q₃ in bf16 (residual 2⁻²⁷), P = P₁ + P₂ (2⁻¹⁸; the denominator sums the same
//    parts, so the weights stay a consistent softmax), each tile's Oᵀ merged into fp32 registers
//    by one FFMA (acc·c + o), never accumulated across tiles in the tensor core. Per tile
//    (d = 128): 24 + 16 mma, 16 ldmatrix, 6 exp2, 6 shuffles, 4 movmatrix (S's fragment
//    transposed into Pᵀ's), 32 FFMA, 16 cp.async: ~10 instructions per slot-head, 7% of issue;
//  * in flight: each warp streams its tiles through its own 3-stage cp.async ring (8 KiB per
//    stage; zero-filling 16-byte copies), two tiles in flight while it computes the third; 4 warps
//    and 108 KiB per block, 2 blocks per SM: 128 KiB in flight per SM, ~3× what latency asks;
//  * waves: one wave of blocks (2 per SM), each a contiguous slot range; blockIdx.x is the KV
//    head, so the blocks of one range run side by side over the same 2 KiB slot rows;
//  * masks: a linear cache (slot_positions == nullptr) decides visibility from the slot index:
//    no position loads, hidden rows zero-filled without a read, nothing past p visited. A ring
//    stages its 16 positions with the tile and zeroes empty slots' values (0·NaN poisons an mma).
// Expected ~3.8–4.0 TB/s (90–95% of copy) at 128K–256K slots: HBM-bound with issue to spare.
// Caches of ≤ kWindowDecodeMaxSlots (2K) slots do not come here: at that size the work is a few
// memory round trips, and this kernel's ring prologue, serial mma chain per tile and separate
// combine (7–10 µs per layer with the store at swa 576, against 0.6 µs of bytes) lose to the
// one-launch cluster kernel of attention_decode_window.cu (its own cost model). A split that
// finds a single range (huge head counts) still writes its output directly. Every kernel is a
// programmatic dependent (PDL). An fp32 cache takes the same staging with plain fp32 FMA (exact;
// not tuned).
//
// Files: this one; attention_decode_combine.cu (the split plan, the partials' workspace and the
// combine kernel); attention_decode_split.cuh (what the two share); attention_decode_window.cu
// (a short cache); store_kv_slots.cu (the store of new keys/values in their cache slots).
#include "backend/cuda/attention_decode.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/attention_decode_split.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_math.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

using namespace attention_decode_detail;

constexpr int kStages = 3;          // tiles of each warp's cp.async ring
constexpr int kMaxSharedBytes = 227 * 1024;  // the sm_90 per-block limit

// ---- PTX wrappers ----------------------------------------------------------------------------

using device::commit_async_copies;
using device::copy16_async_zero_fill;
using device::copy8_async;
using device::shared_address;
using device::wait_async_copies;
// Four 8×8 matrices of 16-bit elements; lanes 8i … 8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void load_matrices(unsigned address, std::uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address) : "memory");
}
__device__ __forceinline__ void load_matrices_transposed(unsigned address, std::uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address) : "memory");
}
// c += a·b, A 16×16 (row), B 16×8 (col), T (bf16 or fp16) in, fp32 accumulate.
template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                            std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// The 8×8 16-bit matrix whose row lane/4, columns 2(lane%4) + {0,1} this lane holds, transposed
// into the same layout.
__device__ __forceinline__ std::uint32_t transpose_matrix(std::uint32_t x) {
  std::uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// Max / sum over the lanes that differ only in lane bits [log2 first, log2 last]: xor butterflies.
__device__ __forceinline__ float max_over_lanes(float x, int first, int last) {
  for (int offset = first; offset <= last; offset *= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ __forceinline__ float sum_over_lanes(float x, int first, int last) {
  for (int offset = first; offset <= last; offset *= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Shared memory of one block: q (fp32, [kHeadsPerUnit][16·DT], pre-scaled), then each warp's
// ring of kStages stages: keys [16][pitch], values [16][pitch], positions int64[16]. A row's
// pitch is an odd number of 16-byte units ≥ its bytes + 16: ldmatrix's 8 rows then fall in 8
// different bank groups, and a bf16 row of d ≡ 8 (mod 16) has room for its zero chunk.
struct StageLayout {
  int pitch, stage_bytes, warp_bytes, warps, shared_bytes;
};

template <typename T>
StageLayout stage_layout(int head_dim, int d_tiles) {
  const int units = head_dim * int(sizeof(T)) / 16;
  const int pitch = 16 * (units % 2 == 0 ? units + 1 : units + 2);
  const int stage = 2 * kTileSlots * pitch + kTileSlots * int(sizeof(std::int64_t));
  const int q_bytes = kHeadsPerUnit * 16 * d_tiles * int(sizeof(float));
  const int warps = std::clamp((kMaxSharedBytes - q_bytes) / (kStages * stage), 1, kMaxWarps);
  return {pitch, stage, kStages * stage, warps, q_bytes + warps * kStages * stage};
}

// ---- Tile staging (device) -------------------------------------------------------------------

// Which slots of the cache a block reads, and how visibility is decided.
struct SlotRange {
  std::int64_t position;   // the query's p
  std::int64_t end;        // slots [0, end) exist for this call (a linear cache: p + 1)
  bool ring;               // slot_positions given
};

// Copies tile [first, first + 16) of KV head `kv` into `stage`: 16-byte chunks, LANES lanes per
// row, ROWS_AT_ONCE rows per pass. Rows past `end`, and a linear cache's hidden rows, are
// zero-filled without a read; a whole tile (nearly every one) skips those per-row checks. A row
// of an odd number of chunks (bf16, d ≡ 8 mod 16) gets a zero chunk after it: the mma's last
// k-step then reads 8 zero columns (against zero q), not the next row.
template <typename T, int DT>
__device__ void copy_tile(const DecodeAttentionArgs<T>& a, int kv, std::int64_t first, const SlotRange& range,
                          unsigned char* stage, int pitch, int lane) {
  constexpr int CHUNKS = 16 * DT * int(sizeof(T)) / 16;  // a power of two ≥ the row's chunks
  constexpr int LANES = CHUNKS < 32 ? CHUNKS : 32;
  constexpr int ROWS_AT_ONCE = 32 / LANES, CHUNKS_PER_LANE = CHUNKS / LANES;
  constexpr int VEC = 16 / int(sizeof(T));
  const int row_chunks = a.head_dim / VEC, padded_chunks = sizeof(T) == 2 ? (row_chunks + 1) & ~1 : row_chunks;
  const std::int64_t row_stride = std::int64_t(a.kv_heads) * a.head_dim;
  const int lane_row = lane / LANES, lane_chunk = lane % LANES;
  const std::int64_t lane_offset = (first + lane_row) * row_stride + std::int64_t(kv) * a.head_dim + lane_chunk * VEC;
  const unsigned keys = shared_address(stage) + lane_row * pitch + lane_chunk * 16;
  const unsigned values = keys + kTileSlots * pitch;
  const auto copy_rows = [&](auto checked) {
    #pragma unroll
    for (int pass = 0; pass < kTileSlots / ROWS_AT_ONCE; ++pass) {
      bool wanted = true;
      if constexpr (decltype(checked)::value) {
        const std::int64_t slot = first + pass * ROWS_AT_ONCE + lane_row;
        wanted = slot < range.end &&
                 (range.ring || device::key_visible(range.position, slot, a.window, a.sink_tokens));
      }
      const std::int64_t offset = lane_offset + pass * ROWS_AT_ONCE * row_stride;
      #pragma unroll
      for (int c = 0; c < CHUNKS_PER_LANE; ++c) {
        const int chunk = lane_chunk + c * LANES;
        if (chunk >= padded_chunks) continue;
        const bool read = wanted && chunk < row_chunks;
        const unsigned to = pass * ROWS_AT_ONCE * pitch + c * LANES * 16;
        copy16_async_zero_fill(keys + to, a.keys + (read ? offset + c * LANES * VEC : 0), read ? 16 : 0);
        copy16_async_zero_fill(values + to, a.values + (read ? offset + c * LANES * VEC : 0), read ? 16 : 0);
      }
    }
  };
  if (first + kTileSlots <= range.end && (range.ring || a.window == 0))
    copy_rows(std::false_type{});
  else
    copy_rows(std::true_type{});
  if (range.ring && lane < kTileSlots / 2) {  // two int64 positions per lane
    const std::int64_t slot = first + 2 * lane;
    unsigned char* positions = stage + 2 * kTileSlots * pitch + 16 * lane;
    if (slot + 1 < range.end) {
      copy16_async_zero_fill(positions, a.slot_positions + slot, 16);
    } else if (slot < range.end) {
      // An odd ring's last slot alone: an 8-byte copy, and the slot past the end zeroed as the
      // zero-fill would. A 16-byte copy of 8 source bytes addresses 8 bytes past the positions
      // array, which compute-sanitizer's memcheck reports and stops the kernel on (stop 49).
      copy8_async(positions, a.slot_positions + slot);
      *reinterpret_cast<std::int64_t*>(positions + 8) = 0;
    } else {
      copy16_async_zero_fill(positions, a.slot_positions, 0);
    }
  }
}

// Bit r: slot first + r is visible. Lanes r and r + 16 decide row r (the same answer).
template <typename T>
__device__ unsigned visible_rows(const DecodeAttentionArgs<T>& a, std::int64_t first, const SlotRange& range,
                                 const unsigned char* stage, int pitch, int lane) {
  const int row = lane % kTileSlots;
  const std::int64_t slot = first + row;
  std::int64_t key_position = slot;
  if (range.ring) key_position = reinterpret_cast<const std::int64_t*>(stage + 2 * kTileSlots * pitch)[row];
  const bool visible = slot < range.end && device::key_visible(range.position, key_position, a.window, a.sink_tokens);
  return __ballot_sync(0xffffffffu, visible) & 0xffffu;
}

// A ring's hidden rows inside the range were copied (an empty slot may hold NaN): zero their
// values, so that their zero weights multiply zeros.
__device__ void zero_hidden_values(unsigned char* stage, int pitch, int row_bytes, unsigned hidden, int lane) {
  if (hidden == 0) return;
  unsigned char* values = stage + kTileSlots * pitch;
  for (; hidden != 0; hidden &= hidden - 1) {
    const int row = __ffs(hidden) - 1;
    for (int c = 16 * lane; c < row_bytes; c += 16 * 32)
      *reinterpret_cast<uint4*>(values + row * pitch + c) = make_uint4(0, 0, 0, 0);
  }
  __syncwarp();
}

// ---- Tile arithmetic: tensor cores (bf16 or fp16 cache) --------------------------------------

// One warp's online-softmax state over its tiles, in mma fragments. Lane (g, t) = (lane/4,
// lane%4) holds logits of slots g, g + 8 for heads 2t, 2t + 1, and Oᵀ rows 16i + g, 16i + g + 8
// (columns of d) for the same two heads: the heads never change hands between S and O.
// T is the cache's 16-bit type; q and P are split into parts of that type. fp16's 11-bit
// significand makes the parts' residual smaller than bf16's (q: 2⁻³³ against 2⁻²⁷), but its
// narrow exponent flushes a part below 2⁻²⁴ to zero: an absolute error of ~6·10⁻⁸ on q and on
// the weights (each ≤ 1), far below the cache's own fp16 rounding of k and v (2⁻¹¹ relative).
// With fp16, each element of q · log2(e)/√d must stay below 65,504 (fp16's largest value).
template <typename T, int DT>
struct TensorCoreTile {
  static constexpr int D_PAD = 16 * DT;
  std::uint32_t q[DT][3][2];  // per k-step, per part: the B fragment (Q transposed)
  float acc[DT][4];
  float max[2], sum[2];

  __device__ void start(const float* q_shared) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    #pragma unroll
    for (int j = 0; j < DT; ++j)
      #pragma unroll
      for (int r = 0; r < 2; ++r) {
        float x = q_shared[g * D_PAD + 16 * j + 8 * r + 2 * t], y = q_shared[g * D_PAD + 16 * j + 8 * r + 2 * t + 1];
        #pragma unroll
        for (int part = 0; part < 3; ++part) {  // x = Σ parts to 2⁻²⁷ (bf16)
          q[j][part][r] = device::pack_pair<T>(x, y);
          const float2 kept = device::unpack_pair<T>(q[j][part][r]);
          x -= kept.x;
          y -= kept.y;
        }
      }
    #pragma unroll
    for (int i = 0; i < DT; ++i)
      #pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][r] = 0.0f;
    max[0] = max[1] = -INFINITY;
    sum[0] = sum[1] = 0.0f;
  }

  __device__ void add_tile(const unsigned char* stage, int pitch, unsigned visible, int d) {
    const int lane = threadIdx.x % 32, g = lane / 4;
    // S = K·Q: matrix i of ldmatrix = slots 8(i%2) …, columns 8(i/2) … of the k-step.
    const unsigned keys = shared_address(stage) + (lane % 8 + 8 * (lane / 8 % 2)) * pitch + 16 * (lane / 16);
    float s[3][4] = {};
    #pragma unroll
    for (int j = 0; j < DT; ++j) {
      if (16 * j >= d) break;  // (d ≡ 8 mod 16: the last step's upper 8 columns are zeroes in k and q)
      std::uint32_t k[4];
      load_matrices(keys + 32 * j, k);
      #pragma unroll
      for (int part = 0; part < 3; ++part) mma_16x8x16<T>(s[part], k, q[j][part][0], q[j][part][1]);
    }
    // Mask (a select: a hidden row's logit may be NaN), tile max per head over the 8 lanes of
    // the same t, then the online-softmax step. `shift` keeps e^{−∞ − shift} = 0 finite.
    const bool low_visible = (visible >> g) & 1u, high_visible = (visible >> (g + 8)) & 1u;
    float logit[4];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
      logit[i] = (i < 2 ? low_visible : high_visible) ? s[0][i] + (s[1][i] + s[2][i]) : -INFINITY;
    float correction[2], weight[4];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float new_max = fmaxf(max[h], max_over_lanes(fmaxf(logit[h], logit[h + 2]), 4, 16));
      const float shift = new_max == -INFINITY ? 0.0f : new_max;
      correction[h] = exp2f(max[h] - shift);
      sum[h] *= correction[h];
      weight[h] = exp2f(logit[h] - shift);
      weight[h + 2] = exp2f(logit[h + 2] - shift);
      max[h] = new_max;
    }
    // Pᵀ (slots × heads) as the B operand in two T parts: the logit fragment (rows = slots)
    // transposed by movmatrix, slots 0–7 and 8–15 separately. The denominator sums the parts.
    std::uint32_t p[2][2];
    #pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::uint32_t high = device::pack_pair<T>(weight[2 * half], weight[2 * half + 1]);
      const float2 kept_high = device::unpack_pair<T>(high);
      const std::uint32_t low = device::pack_pair<T>(weight[2 * half] - kept_high.x, weight[2 * half + 1] - kept_high.y);
      const float2 kept_low = device::unpack_pair<T>(low);
      p[0][half] = transpose_matrix(high);
      p[1][half] = transpose_matrix(low);
      sum[0] += kept_high.x + kept_low.x;
      sum[1] += kept_high.y + kept_low.y;
    }
    // Oᵀ += Vᵀ·Pᵀ: matrix i of ldmatrix.trans = slots 8(i/2) …, columns 8(i%2) … of the m-tile.
    const unsigned values = shared_address(stage + kTileSlots * pitch) + (lane % 8 + 8 * (lane / 16)) * pitch +
                            16 * (lane / 8 % 2);
    #pragma unroll
    for (int i = 0; i < DT; ++i) {
      if (16 * i >= d) break;
      std::uint32_t v[4];
      load_matrices_transposed(values + 32 * i, v);
      float o[4] = {};
      mma_16x8x16<T>(o, v, p[0][0], p[0][1]);
      mma_16x8x16<T>(o, v, p[1][0], p[1][1]);
      #pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][r] = fmaf(acc[i][r], correction[r % 2], o[r]);
    }
  }

  // This warp's max, Σ and accumulator ([kHeadsPerUnit][D_PAD]) into shared memory.
  __device__ void store(float* warp_max, float* warp_sum, float* warp_acc, int d) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    sum[0] = sum_over_lanes(sum[0], 4, 16), sum[1] = sum_over_lanes(sum[1], 4, 16);
    if (g == 0) {
      warp_max[2 * t] = max[0], warp_max[2 * t + 1] = max[1];
      warp_sum[2 * t] = sum[0], warp_sum[2 * t + 1] = sum[1];
    }
    #pragma unroll
    for (int i = 0; i < DT; ++i)
      #pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int column = 16 * i + g + 8 * (r / 2);
        if (column < d) warp_acc[(2 * t + r % 2) * D_PAD + column] = acc[i][r];
      }
  }
};

// ---- Tile arithmetic: fp32 cache (plain FMA; exact, not tuned) -------------------------------

// Lane (row, parity) = (lane%16, lane/16) computes slot row's logits for heads parity + 2j; for
// p·v every lane owns columns lane + 32k of all 8 heads.
template <int DT>
struct Fp32Tile {
  static constexpr int D_PAD = 16 * DT, COLUMNS = (D_PAD + 31) / 32;
  const float* q;
  float acc[kHeadsPerUnit][COLUMNS];
  float max[4], sum[4];

  __device__ void start(const float* q_shared) {
    q = q_shared;
    for (int h = 0; h < kHeadsPerUnit; ++h)
      for (int k = 0; k < COLUMNS; ++k) acc[h][k] = 0.0f;
    for (int j = 0; j < 4; ++j) max[j] = -INFINITY, sum[j] = 0.0f;
  }

  __device__ void add_tile(const unsigned char* stage, int pitch, unsigned visible, int d) {
    __shared__ float weights[kMaxWarps][kHeadsPerUnit][kTileSlots], corrections[kMaxWarps][kHeadsPerUnit];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, row = lane % kTileSlots, parity = lane / kTileSlots;
    const float* keys = reinterpret_cast<const float*>(stage + row * pitch);
    float logit[4] = {};
    for (int c = 0; c < d; c += 4) {
      const float4 k = *reinterpret_cast<const float4*>(keys + c);
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 x = *reinterpret_cast<const float4*>(q + (parity + 2 * j) * D_PAD + c);
        logit[j] = fmaf(x.w, k.w, fmaf(x.z, k.z, fmaf(x.y, k.y, fmaf(x.x, k.x, logit[j]))));
      }
    }
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float x = (visible >> row) & 1u ? logit[j] : -INFINITY;
      const float new_max = fmaxf(max[j], max_over_lanes(x, 1, 8)), shift = new_max == -INFINITY ? 0.0f : new_max;
      const float correction = exp2f(max[j] - shift), weight = exp2f(x - shift);
      sum[j] = sum[j] * correction + weight;
      max[j] = new_max;
      weights[warp][parity + 2 * j][row] = weight;
      if (row == 0) corrections[warp][parity + 2 * j] = correction;
    }
    __syncwarp();
    for (int h = 0; h < kHeadsPerUnit; ++h)
      for (int k = 0; k < COLUMNS; ++k) acc[h][k] *= corrections[warp][h];
    const float* values = reinterpret_cast<const float*>(stage + kTileSlots * pitch);
    for (int slot = 0; slot < kTileSlots; ++slot) {
      if (((visible >> slot) & 1u) == 0) continue;
      float v[COLUMNS];
      for (int k = 0; k < COLUMNS; ++k) v[k] = lane + 32 * k < d ? values[slot * (pitch / 4) + lane + 32 * k] : 0.0f;
      for (int h = 0; h < kHeadsPerUnit; ++h)
        for (int k = 0; k < COLUMNS; ++k) acc[h][k] = fmaf(weights[warp][h][slot], v[k], acc[h][k]);
    }
    __syncwarp();  // weights are rewritten by the next tile
  }

  __device__ void store(float* warp_max, float* warp_sum, float* warp_acc, int d) {
    const int lane = threadIdx.x % 32, row = lane % kTileSlots, parity = lane / kTileSlots;
    for (int j = 0; j < 4; ++j) {
      sum[j] = sum_over_lanes(sum[j], 1, 8);
      if (row == 0) warp_max[parity + 2 * j] = max[j], warp_sum[parity + 2 * j] = sum[j];
    }
    for (int h = 0; h < kHeadsPerUnit; ++h)
      for (int k = 0; k < COLUMNS; ++k)
        if (lane + 32 * k < d) warp_acc[h * D_PAD + lane + 32 * k] = acc[h][k];
  }
};

// ---- The split kernel --------------------------------------------------------------------------

// Block (unit blockIdx.x, split blockIdx.y): the tiles of split blockIdx.y's range, tile
// first + w + k·warps to warp w. With one split the block writes the output (learned sink
// included); otherwise its partial (max, Σ, acc) for the combine kernel.
template <typename T, int DT, typename OutT>
__global__ void __launch_bounds__(kMaxWarps * 32, kBlocksPerSm)
    attention_decode_split_kernel(DecodeAttentionArgs<T> a, StageLayout layout, int slices, Partials partials,
                                  OutT* out) {
  using Tile = std::conditional_t<sizeof(T) == 2, TensorCoreTile<T, DT>, Fp32Tile<DT>>;
  constexpr int D_PAD = 16 * DT;
  extern __shared__ __align__(16) unsigned char shared[];
  __shared__ float warp_max[kMaxWarps][kHeadsPerUnit], warp_sum[kMaxWarps][kHeadsPerUnit], head_scale[kHeadsPerUnit];
  if (!a.launch_next_after_wait) device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // q, the position and the newest cache row are the previous kernels'
  if (a.launch_next_after_wait) device::allow_next_kernel_launch();

  const int d = a.head_dim, lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int group = a.query_heads / a.kv_heads, kv = blockIdx.x / slices, slice = blockIdx.x % slices;
  const int first_head = kv * group + slice * kHeadsPerUnit, heads = min(kHeadsPerUnit, group - slice * kHeadsPerUnit);
  // The block's tiles. A linear cache is read only up to p (a long, barely used cache gives
  // whole ranges to the first blocks; the rest find none); a ring's copies do not wait for p.
  SlotRange range{0, a.slots, a.slot_positions != nullptr};
  if (!range.ring) range.position = *a.query_position, range.end = min(a.slots, range.position + 1);
  const std::int64_t tiles = (range.end + kTileSlots - 1) / kTileSlots, per_split = (tiles + gridDim.y - 1) / gridDim.y;
  const std::int64_t first_tile = min(tiles, blockIdx.y * per_split) + warp;
  const std::int64_t end_tile = min(tiles, (blockIdx.y + 1) * per_split);
  const int my_tiles = first_tile < end_tile ? int((end_tile - first_tile + warps - 1) / warps) : 0;
  const auto ring_of = [&](int w) { return shared + kHeadsPerUnit * D_PAD * sizeof(float) + w * layout.warp_bytes; };
  unsigned char* ring = ring_of(warp);
  const auto tile_slot = [&](int k) { return (first_tile + std::int64_t(k) * warps) * kTileSlots; };
  const auto stage = [&](int k) { return ring + (k % kStages) * layout.stage_bytes; };
  for (int k = 0; k < kStages - 1; ++k) {
    if (k < my_tiles) copy_tile<T, DT>(a, kv, tile_slot(k), range, stage(k), layout.pitch, lane);
    commit_async_copies();
  }
  // q (and a ring's p) while the first tiles are in flight.
  float* q_shared = reinterpret_cast<float*>(shared);
  const float q_scale = kLog2e * rsqrtf(float(d));
  for (int i = threadIdx.x; i < kHeadsPerUnit * D_PAD; i += blockDim.x) {
    const int h = i / D_PAD, c = i % D_PAD;
    q_shared[i] = h < heads && c < d ? a.query[(first_head + h) * d + c] * q_scale : 0.0f;
  }
  if (range.ring) range.position = *a.query_position;
  __syncthreads();  // q_shared
  Tile tile;
  tile.start(q_shared);
  for (int k = 0; k < my_tiles; ++k) {
    // Refill the stage tile k − 1 used (every lane is past it: the __syncwarp below).
    if (k + kStages - 1 < my_tiles)
      copy_tile<T, DT>(a, kv, tile_slot(k + kStages - 1), range, stage(k + kStages - 1), layout.pitch, lane);
    commit_async_copies();
    wait_async_copies<kStages - 1>();
    __syncwarp();  // every lane's copies of tile k are visible to the warp
    const unsigned visible = visible_rows(a, tile_slot(k), range, stage(k), layout.pitch, lane);
    if (visible != 0) {
      if (range.ring) {
        const std::int64_t in_range = range.end - tile_slot(k);
        const unsigned copied = in_range >= kTileSlots ? 0xffffu : (1u << in_range) - 1u;
        zero_hidden_values(stage(k), layout.pitch, d * int(sizeof(T)), copied & ~visible, lane);
      }
      tile.add_tile(stage(k), layout.pitch, visible, d);
    }
    __syncwarp();
  }
  wait_async_copies<0>();
  __syncwarp();

  // Merge the warps: M = max_w m_w, L = Σ_w e^{m_w − M} l_w, ACC = Σ_w e^{m_w − M} acc_w (each
  // warp's accumulator goes to its own, now idle, ring).
  float* warp_acc = reinterpret_cast<float*>(ring);
  tile.store(warp_max[warp], warp_sum[warp], warp_acc, d);
  __syncthreads();
  const bool direct = gridDim.y == 1;
  if (threadIdx.x < heads) {
    const int h = threadIdx.x;
    float block_max = -INFINITY, block_sum = 0.0f;
    for (int w = 0; w < warps; ++w) block_max = fmaxf(block_max, warp_max[w][h]);
    const float shift = block_max == -INFINITY ? 0.0f : block_max;
    for (int w = 0; w < warps; ++w) {
      warp_max[w][h] = exp2f(warp_max[w][h] - shift);  // now the warp's factor (0: saw nothing)
      block_sum += warp_max[w][h] * warp_sum[w][h];
    }
    if (direct) {  // o = ACC·e^{M−M'} / (L·e^{M−M'} + e^{S−M'}), M' = max(M, S)
      const float sink = a.learned_sinks ? a.learned_sinks[first_head + h] * kLog2e : -INFINITY;
      const float top = fmaxf(block_max, sink), top_shift = top == -INFINITY ? 0.0f : top;
      const float scale = exp2f(shift - top_shift);
      head_scale[h] = scale / (block_sum * scale + exp2f(sink - top_shift));
    } else {
      head_scale[h] = 1.0f;
      const std::size_t head = std::size_t(blockIdx.y) * a.query_heads + first_head + h;
      partials.max[head] = block_max;  // −∞: the combine reads nothing else of this block
      partials.sum[head] = block_sum;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < heads * d; i += blockDim.x) {
    const int h = i / d, c = i % d;
    float value = 0.0f;
    for (int w = 0; w < warps; ++w) {
      const float factor = warp_max[w][h];
      if (factor != 0.0f) value += factor * reinterpret_cast<const float*>(ring_of(w))[h * D_PAD + c];
    }
    value *= head_scale[h];
    if (direct)
      store_out(out + std::size_t(first_head + h) * d + c, value);
    else
      partials.acc[(std::size_t(blockIdx.y) * a.query_heads + first_head + h) * d + c] = value;
  }
}

// ---- Host ------------------------------------------------------------------------------------

template <typename T, typename OutT, int DT>
void launch_split(const DecodeAttentionArgs<T>& a, const DecodePlan& plan, Partials partials, OutT* out,
                  cudaStream_t stream) {
  const auto kernel = attention_decode_split_kernel<T, DT, OutT>;
  // Two 108 KiB blocks per SM need the largest shared-memory carveout.
  prefer_shared_memory_carveout(kernel, "attention_decode_split_kernel carveout");
  const StageLayout layout = stage_layout<T>(a.head_dim, DT);
  launch_dependent(kernel, dim3(plan.units, plan.splits), dim3(32 * layout.warps), layout.shared_bytes, stream,
                   "attention_decode_split_kernel", a, layout, plan.slices, partials, out);
}

void check_shape(int query_heads, int kv_heads, int head_dim) {
  if (head_dim < 8 || head_dim > 256 || head_dim % 8 != 0)
    fail("attention", "CUDA head_dim must be a multiple of 8 in [8, 256], got " + std::to_string(head_dim));
  if (kv_heads <= 0 || query_heads % kv_heads != 0)
    fail("attention", "query heads (" + std::to_string(query_heads) + ") must be a multiple of KV heads (" +
                          std::to_string(kv_heads) + ")");
}

}  // namespace

template <typename T, typename OutT>
void attention_decode(const DecodeAttentionArgs<T>& a, void* workspace, OutT* out, cudaStream_t stream) {
  check_shape(a.query_heads, a.kv_heads, a.head_dim);
  const bool ring = a.slot_positions != nullptr;
  if ((a.new_key == nullptr) != (a.new_value == nullptr))
    fail("attention_decode", "new_key and new_value go together");
  if (a.new_key != nullptr && ring && a.window > 0 && a.window <= a.sink_tokens)
    fail("attention_decode", "the window must be larger than the sink tokens");
  if (a.slots <= kWindowDecodeMaxSlots) return attention_decode_window(a, out, stream);
  if (a.rope_inv_freq != nullptr)
    fail("attention_decode", "q/k norm and RoPE are folded in only for caches of at most " +
                                 std::to_string(kWindowDecodeMaxSlots) + " slots, not " + std::to_string(a.slots));
  if (a.new_key != nullptr)  // the store first, as the caller would have launched it
    store_kv_slots<T>(a.new_key, a.new_value, 1, a.query_position, a.keys, a.values,
                      a.slot_positions, a.kv_heads, a.head_dim, ring ? a.window : 0,
                      a.sink_tokens, stream);
  const DecodePlan plan = plan_decode(a.slots, a.query_heads, a.kv_heads);
  const Partials partials = partials_in(workspace, plan.splits, a.query_heads, a.head_dim);
  // d rounded up to a power-of-two number of 16-column tiles: the register arrays' size.
  const int d_tiles = a.head_dim <= 16 ? 1 : a.head_dim <= 32 ? 2 : a.head_dim <= 64 ? 4 : a.head_dim <= 128 ? 8 : 16;
  switch (d_tiles) {
    case 1: launch_split<T, OutT, 1>(a, plan, partials, out, stream); break;
    case 2: launch_split<T, OutT, 2>(a, plan, partials, out, stream); break;
    case 4: launch_split<T, OutT, 4>(a, plan, partials, out, stream); break;
    case 8: launch_split<T, OutT, 8>(a, plan, partials, out, stream); break;
    default: launch_split<T, OutT, 16>(a, plan, partials, out, stream); break;
  }
  if (plan.splits > 1)
    launch_combine(partials, plan.splits, a.query_heads, a.head_dim, a.learned_sinks, a.launch_next_after_wait, out,
                   stream);
}

template void attention_decode<__nv_bfloat16, float>(const DecodeAttentionArgs<__nv_bfloat16>&, void*, float*,
                                                     cudaStream_t);
template void attention_decode<__nv_bfloat16, __nv_bfloat16>(const DecodeAttentionArgs<__nv_bfloat16>&, void*,
                                                             __nv_bfloat16*, cudaStream_t);
template void attention_decode<float, float>(const DecodeAttentionArgs<float>&, void*, float*, cudaStream_t);
template void attention_decode<float, __nv_bfloat16>(const DecodeAttentionArgs<float>&, void*, __nv_bfloat16*,
                                                     cudaStream_t);
template void attention_decode<__half, float>(const DecodeAttentionArgs<__half>&, void*, float*, cudaStream_t);
template void attention_decode<__half, __half>(const DecodeAttentionArgs<__half>&, void*, __half*, cudaStream_t);

}  // namespace bifocal::cuda
