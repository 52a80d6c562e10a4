// The chunkwise prefill kernels. All device pointers; plain C++ header.
//
// mLSTM (mlstm_prefill.cu): parallel over chunks — each chunk's contribution to the state, a scan
// over chunks (the state entering each, in a stabilized log-scale), then every chunk's outputs —
// so a 4,096-token prefill keeps the whole GPU busy instead of walking 64 chunks in sequence.
//
// Linear attention and LoLCATs (recurrent_chunkwise.cu, called by recurrent_prefill.cu): one
// kernel that runs a KV head's whole sequence chunk by chunk. Per KV head and chunk of L tokens
// entered with state (S_0, z_0),
//   scores  S_τj = φ(q_τ) · φ(k_j)                 (j ≤ τ; LoLCATs: 0 for a leaving key that does not exist yet)
//   numer.  h_τ  = φ(q_τ)ᵀS_0 + Σ_j S_τj v_j,      φ(q)·z_τ = φ(q_τ)ᵀz_0 + Σ_j S_τj
//   leaving S_L  = S_0 + Σ_j φ(k_j) v_jᵀ,          z_L likewise.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "backend/cpu/mlstm.h"
#include "backend/cuda/attention_prefill.cuh"

namespace bifocal::cuda {

// cpu::mlstm_chunkwise on the GPU (DESIGN.md mlstm): q [n, Hq, d], k, v [n, Hkv, d], the raw gate
// pre-activations (MlstmGateInputs); out [n, Hq, d] in Out (float, or the model's bf16 or fp16:
// the outputs are rounded once, as they are written). The state (cpu::MlstmState
// layout) is read and advanced by the n tokens in place, so consecutive calls continue one
// sequence. Equal to cpu::mlstm_recurrent to fp32 rounding for any n, any starting state and any
// gates; the stabilizer m is the CPU's fp32 sequence (bit for bit but for a double-rounding tie,
// ~2^-28 a token, which moves it one ulp). head_dim: a multiple of 8, at most 256. The workspace (16-byte
// aligned, mlstm_prefill_workspace_bytes(shape, n, products) bytes; 42 MiB for Qwen3-4B's 8 states and 4,096
// tokens) holds the per-chunk states and weights. Four kernels on `stream`; nothing allocated or
// synchronised.
//
// `products` sets the precision of the numerators' matrix products (the chunk contributions ΔC̃,
// q̂ᵀC, q̂·k and S'·V on the tensor cores); the gates, weights, stabilizer and the normaliser path
// are the same in both.
enum class MlstmProducts {
  Fp32,  // 3xTF32: fp32 accuracy, the contract above (fp32 models, the tests against the CPU)
  Tf32,  // one TF32 pass, every operand rounded to nearest TF32 (10 mantissa bits) once where it
         // is staged: for bf16 and fp16 models, whose q, k and v come out of 8- and 11-bit products
         // already, so the mixer's inputs are not resolved finer than that (~3× fewer instructions)
  Bf16,  // the outputs' products on bf16 operands (q, k, v, C_c and the weighted scores rounded
         // to bf16 once, as the window attention rounds its q, k, v and softmax weights), fp32
         // accumulation; the contributions with w∘V in bf16 and k in TF32. For bf16 models, where
         // the shape has that outputs kernel (L = 64, d a multiple of 32 up to 128, or 256); other
         // shapes run Tf32's outputs kernel
};
// Token j's gates for state head s: input[j·stride + s], forget[j·stride + s]. stride ≥ S: S for
// gates of their own, more where one projection lays out a token's gates side by side (the
// mixers' [input | forget | mix] rows, DeviceMixer::gate_products).
struct MlstmGateInputs {
  const float* input;
  const float* forget;
  int stride;
  // The gates' biases ([S] each), added by the kernel that reads each pre-activation, so that the
  // product needs no pass of its own (DeviceMixer::gate_products). nullptr: the rows hold them.
  const float* input_bias = nullptr;
  const float* forget_bias = nullptr;
};
// Bifocal's mix, out = o·h + (1 − o)·window with o = sigmoid(mix gate) (DESIGN.md bifocal), done
// without a pass of its own: with `gate` set, `out` holds the window branch already scaled,
// (1 − o)·window in Out (attention_prefill's output_gate), written on `stream` before the outputs
// kernel (before this call, or by mlstm_prefill's window_branch), and the outputs kernel adds
// Out(o·h) onto it in L2 (the sum rounded to Out once), o = sigmoid(gate[token·gate_stride + query head]).
struct MlstmOutputMix {
  const float* gate = nullptr;  // token t's mix gate pre-activations at gate[t·gate_stride … + Hq)
  int gate_stride = 0;          // ≥ Hq
  const float* gate_bias = nullptr;  // [Hq], added to each pre-activation as it is read (as MlstmGateInputs')
};
// Bifocal with bf16 storage: the call's k and v as the window's gather rounded them to bf16 for the
// attention ([n, Hkv, d]: the rows after the cached window in the gathered copy). The bf16 outputs
// kernel then copies its chunk's keys and values straight into shared memory (cp.async) instead of
// loading the fp32 ones through registers and rounding them: the same bits, since both round to
// nearest even, without the loads a block's first barrier waited on (the kernel's largest stall
// at 1K: stop 63's line profile). Both null: the kernel rounds k and v itself. Read only after
// the call's denominators kernel, so the gather may run inside the call (window_gather).
struct MlstmRoundedKeyValues {
  const __nv_bfloat16* keys = nullptr;
  const __nv_bfloat16* values = nullptr;
};
std::size_t mlstm_prefill_workspace_bytes(const cpu::MlstmShape& shape, int n, MlstmProducts products);
// How many blocks share each (state, chunk) in the denominators kernel for a call of n tokens: 2
// where its latency-bound variant at d = 256 fits twice its blocks one an SM, else 1
// (chunk_denominator_parts). The tests choose n by it, so that both plans run on any GPU.
int mlstm_prefill_denominator_parts(const cpu::MlstmShape& shape, int n, MlstmProducts products);
// window_branch (Bifocal, optional): launches the window branch on `stream` between the
// denominators kernel and the outputs kernel. The denominators kernel then lets the next kernel
// launch only once every kernel before it has completed (dependent_launch.h), so the branch's
// first kernel has its inputs at once, runs beside the denominators, and must wait for them at
// its end (PrefillAttentionArgs::beside_previous_kernel); at 1K tokens this hides most of the
// window attention behind the mLSTM chain without a second stream. The branch is offered the
// mLSTM's outputs for its attention's epilogue (PrefillMlstmOutputs; `states` null where the call
// does not offer them) and returns whether it took them; if it did, no outputs kernel follows.
// Offered with bf16 products, a state per KV head, chunks of kMlstmChunk and the (state, chunk)
// blocks at most one an SM; taken where the attention can (attention_prefill_takes_mlstm_outputs:
// bf16 output, d = 128 or 256), so at 1K tokens of Qwen3-4B and up to 2K of the Qwen3.5-like
// shape. There the outputs kernel's blocks, ~105 KB of
// shared memory each, start only as the attention's last blocks do, and their tail after it was
// ~17 µs of the layer (docs/notes/cuda-stop65-2026-12-06.md).
// window_gather (Bifocal, optional): launches the window's gather on `stream`, called once, with
// beside_contributions false before the first kernel, or true right after the contributions
// kernel (kernel 1), which then lets the next kernel launch only after its wait: the gather copies
// at once and must wait for kernel 1 at its end (GatherWindowArgs::wait_at_end). Beside where
// kernel 1's (state, chunk) blocks are at most one an SM (1K tokens of Qwen3-4B, up to 2K of the
// Qwen3.5-like shape): kernel 1 then no longer waits for the gather before it starts; with more
// blocks its grid fills the SMs and the gather would wait for room (docs/notes/cuda-stop53-2026-12-05.md).
using MlstmWindowBranch = std::function<bool(const PrefillMlstmOutputs&)>;
template <typename Out>
void mlstm_prefill(const cpu::MlstmShape& shape, const float* q, const float* k, const float* v, MlstmGateInputs gates,
                   int n, cpu::MlstmState state, Out* out, MlstmProducts products, void* workspace,
                   cudaStream_t stream, MlstmOutputMix mix = {},
                   const MlstmWindowBranch& window_branch = {},
                   const std::function<void(bool beside_contributions)>& window_gather = {},
                   MlstmRoundedKeyValues rounded = {});

enum class ChunkwiseNormalisation {
  Linear,        // h / (φ(q)ᵀz + ε)
  Unnormalised,  // h as is, φ(q)ᵀz to `denominators` (LoLCATs merges it with the window)
};

struct ChunkwiseArgs {
  int n, chunk;                          // tokens; chunk length L (a multiple of 4)
  int query_heads, kv_heads;             // the states: one per KV head
  int feature_dim, head_dim;             // f rows, d columns of each state
  const float* query_features;           // [n, Hq, f]: φ(q)
  const float* key_features;             // [n, Hkv, f]: φ(k) (LoLCATs: of the leaving key)
  const float* values;                   // [n, Hkv, d]
  const std::int64_t* tokens_seen;       // LoLCATs: keys exist from token w − start on; else nullptr
  int window;                            // LoLCATs w
  float* matrix;                         // [Hkv, f, d]
  float* normalizer;                     // [Hkv, f]
  float* out;                            // [n, Hq, d]
  float* denominators;                   // [n, Hq] (Unnormalised)
};

// Runs the n tokens of args on `stream` (one cluster of up to 8 blocks per KV head, each owning a
// slice of the state's columns, which stays in its shared memory for the whole call). args.chunk
// is chosen here. Nothing is allocated or synchronised.
void launch_chunkwise(ChunkwiseNormalisation normalise, ChunkwiseArgs args, cudaStream_t stream);

}  // namespace bifocal::cuda
