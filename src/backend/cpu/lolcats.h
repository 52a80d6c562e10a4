// CPU kernels of the LoLCATs mixer (DESIGN.md "Mixers: exact semantics", lolcats): softmax over
// the window W(t) = {max(0, t−w+1) … t} plus the linear term of the keys that have left it, with
// one shared normalizer:
//   y = (γ Σ_{j∈W} e^{s_j−m} v_j + Σ_{j∉W} φ(q)ᵀφ(k_j) v_j) / (γ Σ_{j∈W} e^{s_j−m} + Σ_{j∉W} φ(q)ᵀφ(k_j)),
//   s_j = q·k_j/√d, m = max_{j∈W} s_j (subtracted from the softmax term only), γ = sigmoid(window_factor[h]).
// There is no ε: the window always holds the current key, so the denominator is at least γ.
#pragma once

#include <cstdint>

#include "backend/cpu/linear_attention.h"

namespace bifocal::cpu {

// Tokens per chunk of the linear part in lolcats_prefill.
inline constexpr int kLolcatsPrefillChunk = 64;

struct LolcatsState {
  float* window_keys;          // ring buffer [w, Hkv, d]: token p sits in slot p % w
  float* window_values;        // [w, Hkv, d]
  LinearState linear;          // keys that left the window: S [Hkv, f, d], z [Hkv, f]
  std::int64_t* tokens_seen;   // tokens processed so far (ring position = tokens_seen % w)
};

// Floats of one ring buffer (keys or values): w × Hkv × d.
std::int64_t lolcats_window_floats(const LinearShape&, int window);

void lolcats_reset(const LinearShape&, int window, LolcatsState);

// hedgehog_weight: [Hkv, d, 64] (may be null for elu1); window_factor: [Hq]
// (model.layers.i.self_attn.window_factor). q: [n, Hq, d], k, v: [n, Hkv, d] after RoPE; out:
// [n, Hq, d]. Both forms continue the sequence held in the state and advance it by n tokens.

// Token by token: at token t the key t − w leaves the ring for the linear state, token t takes
// its slot, then the query reads both. Allocates nothing: this is the decode path.
void lolcats_step_by_step(const LinearShape&, int window, const float* hedgehog_weight, const float* window_factor,
                          const float* q, const float* k, const float* v, int n, LolcatsState, float* out);
// The prefill form, same result to fp32 rounding: the linear part is chunkwise linear attention
// over the stream of keys as they leave the window (key t − w enters at token t), the window part
// banded softmax attention over the ring and the new keys. Scratch is O(n · d) per KV head.
void lolcats_prefill(const LinearShape&, int window, const float* hedgehog_weight, const float* window_factor,
                     const float* q, const float* k, const float* v, int n, LolcatsState, float* out);

}  // namespace bifocal::cpu
