// Bifocal's prefill epilogue makes h = q̂·C_c at d = 256 as one warpgroup (issue_state_products over
// C_c's B tiles, attention_prefill_mlstm_outputs.cuh; warpgroup_products.cuh). Here that product, with C_c's
// tiles copied as the epilogue copies them (copy_state_tile_async), is set beside
// - a double-precision product of the same bf16 operands: within fp32 accumulation's rounding, and
// - the mma.sync m16n8k16 chain the bf16 outputs kernel takes (mlstm_prefill_bf16.cu), with every
//   accumulator's k-steps in the same order: the same bits, which BifocalPrefillMix's bit tests
//   rely on (the epilogue's outputs equal that kernel's).
// Fresh random inputs (the seed is printed with any failure), d = 128 and 256, both column halves:
// d = 128 is not the epilogue's (it keeps mma.sync there), but the product holds for any depth.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/attention_prefill_mlstm_outputs.cuh"
#include "cuda/cuda_test_support.h"
#include "cuda/recurrent_test_support.h"

namespace bifocal {
namespace {

using T = __nv_bfloat16;
namespace tiles = cuda::prefill_tiles;
constexpr int kRows = tiles::kBlockRows, kColumns = 128;

// The pair (x, y) of a row as one A or B fragment register (the lower column in the low half):
// bf16 → float → bf16 is exact, so pack_pair's rounding leaves the values as they are.
__device__ std::uint32_t pair_of(const T* x, const T* y) {
  return cuda::device::pack_pair<T>(__bfloat162float(*x), __bfloat162float(*y));
}

// q: kRows × D; state: D × D (C_c), the block's columns from first_column. Out: kRows × kColumns
// fp32 each, by the warpgroup product and by the mma.sync chain.
template <int D>
__global__ void __launch_bounds__(tiles::kThreads) state_products_kernel(const T* q, const T* state, int first_column,
                                                                          float* warpgroup_out, float* sync_out) {
  extern __shared__ __align__(1024) unsigned char shared_bytes[];
  T* b_tiles = reinterpret_cast<T*>(shared_bytes);
  constexpr int kTiles = D / tiles::kTileKeys;
  std::uint32_t tile_bases[kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    T* tile = b_tiles + t * tiles::kTileKeys * kColumns;
    tiles::copy_state_tile_async<T, D>(tile, state + std::size_t(t) * tiles::kTileKeys * D + first_column);
    tile_bases[t] = cuda::device::shared_address(tile);
  }
  cuda::device::commit_async_copies();

  // This lane's rows (fragment rows lane / 4 and + 8 of its warp's 16) as A fragments.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  std::uint32_t a[D / 16][4];
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const T* x = q + std::size_t(warp * 16 + g + 8 * r) * D + 16 * ks + 8 * half + 2 * c;
        a[ks][r + 2 * half] = pair_of(x, x + 1);
      }

  cuda::device::wait_async_copies<0>();
  cuda::device::fence_shared_for_warpgroup();
  __syncthreads();
  float h[kColumns / 8][4] = {};
  tiles::issue_state_products<T, D, kColumns, 0, kTiles>(h, a, tile_bases);
  tiles::await_state_products<kColumns>(h);

  // The bf16 outputs kernel's form: one m16n8k16 a k-step and n-tile, k-steps in order.
  float reference[kColumns / 8][4] = {};
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
    for (int nt = 0; nt < kColumns / 8; ++nt) {
      const T* column = state + std::size_t(16 * ks + 2 * c) * D + first_column + 8 * nt + g;
      const std::uint32_t b0 = pair_of(column, column + D), b1 = pair_of(column + 8 * D, column + 9 * D);
      cuda::device::mma_m16n8k16<T>(reference[nt], a[ks], b0, b1);
    }

#pragma unroll
  for (int nt = 0; nt < kColumns / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::size_t at = std::size_t(warp * 16 + g + 8 * (e / 2)) * kColumns + 8 * nt + 2 * c + e % 2;
      warpgroup_out[at] = h[nt][e];
      sync_out[at] = reference[nt][e];
    }
}

template <int D>
void expect_warpgroup_product_matches(std::mt19937& rng, int first_column) {
  SCOPED_TRACE("d " + std::to_string(D) + " first column " + std::to_string(first_column));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> q(std::size_t(kRows) * D), state(std::size_t(D) * D);
  for (T& x : q) x = __float2bfloat16(normal(rng));
  for (T& x : state) x = __float2bfloat16(normal(rng));
  const cuda::DeviceBuffer<T> q_device = testing::upload(q), state_device = testing::upload(state);
  cuda::DeviceBuffer<float> warpgroup_out(std::size_t(kRows) * kColumns), sync_out(std::size_t(kRows) * kColumns);
  warpgroup_out.fill_bytes(0xFF);
  sync_out.fill_bytes(0xFF);
  const std::size_t shared_bytes = std::size_t(D) * kColumns * sizeof(T);
  auto* kernel = state_products_kernel<D>;
  ASSERT_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)),
            cudaSuccess);
  kernel<<<1, tiles::kThreads, shared_bytes>>>(q_device.data(), state_device.data(), first_column,
                                               warpgroup_out.data(), sync_out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = warpgroup_out.download(), chain = sync_out.download();

  std::size_t differ = 0, beyond = 0;
  for (int row = 0; row < kRows; ++row)
    for (int column = 0; column < kColumns; ++column) {
      double exact = 0.0, magnitude = 0.0;
      for (int k = 0; k < D; ++k) {
        const double term = double(__bfloat162float(q[std::size_t(row) * D + k])) *
                            double(__bfloat162float(state[std::size_t(k) * D + first_column + column]));
        exact += term;
        magnitude += std::fabs(term);
      }
      const std::size_t at = std::size_t(row) * kColumns + column;
      // fp32 accumulation of D products: a few units of 2^-24 of the magnitude a k-step, bounded
      // loosely by D of them (the tensor cores' internal additions round towards zero).
      beyond += !(std::fabs(got[at] - exact) <= D * 0x1p-23 * magnitude + 1e-30);
      differ += std::memcmp(&got[at], &chain[at], sizeof(float)) != 0;
    }
  EXPECT_EQ(beyond, 0u) << "of " << got.size() << " outputs beyond fp32 accumulation's rounding";
  EXPECT_EQ(differ, 0u) << "of " << got.size() << " outputs differ from the mma.sync chain's bits";
}

class WarpgroupStateProducts : public testing::CudaTest {};

TEST_F(WarpgroupStateProducts, MatchTheExactProductAndTheMmaSyncChainsBits) {
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  expect_warpgroup_product_matches<128>(rng, 0);
  expect_warpgroup_product_matches<256>(rng, 0);
  expect_warpgroup_product_matches<256>(rng, 128);
}

}  // namespace
}  // namespace bifocal
