// Naive reference of the mLSTM mixer (DESIGN.md "Mixers: exact semantics", mlstm), written for
// obviousness, not speed: the quadratic (parallel) form from the zero state, in double. Tests
// compare the CPU kernels of backend/cpu/mlstm.h to it.
#pragma once

#include <vector>

#include "backend/cpu/mlstm.h"

namespace bifocal::reference {

struct MlstmResult {
  std::vector<float> out;         // [n, Hq, d]
  std::vector<float> matrix;      // C after the n tokens: [S, d, d]
  std::vector<float> normalizer;  // n: [S, d]
  std::vector<float> stabilizer;  // m: [S]
};

// Inputs as for cpu::mlstm_recurrent, starting from C = 0, n = 0, m_0 = 0. For each state and
// token t, with logF_t = Σ_{u≤t} logsigmoid(f̃_u):
//   m_t = max(logF_t + m_0, max_{j≤t} (logF_t − logF_j + ĩ_j)),
//   weights w_tj = exp(logF_t − logF_j + ĩ_j − m_t),
//   h_t = Σ_j w_tj (q̂·k_j) v_j / (max(|Σ_j w_tj (q̂·k_j)|, exp(−m_t)) + 1e-6).
MlstmResult mlstm(const cpu::MlstmShape& shape, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const std::vector<float>& input_gate,
                  const std::vector<float>& forget_gate, int n);

}  // namespace bifocal::reference
