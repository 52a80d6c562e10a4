// n-token prefill of the recurrent mixers on the GPU, in the chunkwise form (DESIGN.md mlstm,
// linear, lolcats): within a chunk of tokens the outputs are computed in parallel with the causal
// (decay-weighted) matrix of query–key products, across chunks the state is carried. Equal to the
// one-token recurrence of recurrent_decode.cuh, and to the CPU kernels, to fp32 rounding, for
// any n and any starting state; consecutive calls continue one sequence.
//
// Every pointer is a DEVICE pointer; layouts as in recurrent_decode.cuh and the CPU headers:
// q, out [n, Hq, d]; k, v [n, Hkv, d]; gates [n, S]. Nothing is allocated or synchronised;
// scratch ("workspace", 16-byte aligned) is passed in, sized by the *_workspace_bytes functions.
// head_dim: a multiple of 8, at most 256. Several kernels are launched on `stream`, in order.
//
// Cost: per state head and chunk of L tokens, L²·f (scores) + L·f·d (reading the entering state)
// + L²·d (intra-chunk values) + L·f·d (the state update) multiply-adds on CUDA cores, the state
// read and written once per chunk (L2-resident). The state's columns are split over a cluster of
// blocks, each of which recomputes the L×L scores (the price of not exchanging them).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/linear_attention.h"
#include "backend/cpu/mlstm.h"
#include "backend/cuda/recurrent_chunkwise.cuh"
#include "backend/cuda/recurrent_decode.cuh"

namespace bifocal::cuda {

// cpu::mlstm_chunkwise on the GPU, parallel over chunks: mlstm_prefill and
// mlstm_prefill_workspace_bytes (recurrent_chunkwise.cuh, included above).

// cpu::linear_attention_chunkwise on the GPU (the state advanced by the n tokens). The workspace
// holds φ(q) and φ(k) of the n tokens.
std::size_t linear_prefill_workspace_bytes(const cpu::LinearShape& shape, int n);
void linear_prefill(const cpu::LinearShape& shape, const float* hedgehog_weight, const float* q, const float* k,
                    const float* v, int n, cpu::LinearState state, float* out, void* workspace,
                    cudaStream_t stream);

// cpu::lolcats_prefill on the GPU, continuing at t = *state.tokens_seen (read, not advanced: the
// caller adds n afterwards). The linear part is chunkwise linear attention over the keys as they
// leave the window (key t − w enters at token t), the window part softmax over the last w
// positions, both merged with one normaliser; the last min(w, t + n) tokens are then stored in
// the ring (converted to T). Keys and values of the chunk are used as the ring keeps them (rounded
// to T), so a prefill equals the same tokens decoded one by one. The workspace holds φ(q), φ and
// values of the leaving keys, and the linear denominators.
std::size_t lolcats_prefill_workspace_bytes(const cpu::LinearShape& shape, int n);
template <typename T>
void lolcats_prefill(const cpu::LinearShape& shape, int window, const float* hedgehog_weight,
                     const float* window_factor, const float* q, const float* k, const float* v, int n,
                     LolcatsDeviceState<T> state, float* out, void* workspace, cudaStream_t stream);

}  // namespace bifocal::cuda
