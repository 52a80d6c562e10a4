#include "backend/cpu/mlstm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace bifocal::cpu {
namespace {

// DESIGN.md mlstm: gate pre-activations are soft-capped, 15·tanh(x/15).
constexpr double kGateCap = 15.0;
// DESIGN.md mlstm: h_t = q̂ᵀC_t / (max(|q̂ᵀn_t|, exp(−m_t)) + 1e-6).
constexpr double kDenominatorEps = 1e-6;

// One token's gates for one state head, in log space. They stay in double: rounding ĩ ≈ 15 to
// fp32 would move its weight e^{ĩ − m} by up to 5e-7, which a near-cancelling q̂ᵀn magnifies.
struct LogGates {
  double input;       // ĩ = 15·tanh(i_raw/15)
  double log_forget;  // logf = logsigmoid(15·tanh(f_raw/15))
};

LogGates log_gates(float input_raw, float forget_raw) {
  const double input = kGateCap * std::tanh(double(input_raw) / kGateCap);
  const double forget = kGateCap * std::tanh(double(forget_raw) / kGateCap);
  // logsigmoid(x) = min(x, 0) − log1p(exp(−|x|)): exp never sees a positive argument.
  const double log_forget = std::min(forget, 0.0) - std::log1p(std::exp(-std::abs(forget)));
  return {input, log_forget};
}

// DESIGN.md: m_t = max(logf + m_{t−1}, ĩ), rounded to fp32 as the state stores it. Both forms
// step m with this one function, so their stabilizers agree bit for bit, and so does the
// exp(−m_t) term of the denominator. Every weight is then taken relative to these fp32 values
// (f′ = exp(logf + m_{t−1} − m_t) exactly as written), so rounding m changes no output except
// through exp(−m_t).
float next_stabilizer(float previous, LogGates gates) {
  return float(std::max(gates.log_forget + double(previous), gates.input));
}

// DESIGN.md: the denominator max(|q̂ᵀn_t|, exp(−m_t)) + 1e-6.
double denominator(double query_dot_normalizer, float stabilizer) {
  return std::max(std::abs(query_dot_normalizer), std::exp(-double(stabilizer))) + kDenominatorEps;
}

// Where the heads of one state live in the [n, heads, d] inputs and outputs.
struct StateHeads {
  int kv_head;      // k, v written into the state: KV head s / (S / Hkv)
  int first_query;  // query heads first_query … first_query + group − 1 read it: h / (Hq / S) = s
  int group;        // Hq / S
};

StateHeads heads_of_state(const MlstmShape& shape, int s) {
  const int group = shape.query_heads / shape.states;
  return {s / (shape.states / shape.kv_heads), s * group, group};
}

// The call's inputs, with the row addressing of their [n, heads, d] layouts.
struct Inputs {
  const MlstmShape& shape;
  const float *q, *k, *v, *input_gate, *forget_gate;
  float* out;
  const float* query(int t, int h) const { return q + (std::int64_t(t) * shape.query_heads + h) * shape.head_dim; }
  const float* key(int t, int kv) const { return k + (std::int64_t(t) * shape.kv_heads + kv) * shape.head_dim; }
  const float* value(int t, int kv) const { return v + (std::int64_t(t) * shape.kv_heads + kv) * shape.head_dim; }
  float* output(int t, int h) const { return out + (std::int64_t(t) * shape.query_heads + h) * shape.head_dim; }
  LogGates gates(int t, int s) const {
    const std::int64_t at = std::int64_t(t) * shape.states + s;
    return log_gates(input_gate[at], forget_gate[at]);
  }
};

// One state head's slice of the caller's state.
struct StateSlice {
  float* matrix;      // [d, d]
  float* normalizer;  // [d]
  float* stabilizer;  // one value
};

StateSlice slice_of(const MlstmShape& shape, MlstmState state, int s) {
  const int d = shape.head_dim;
  return {state.matrix + std::int64_t(s) * d * d, state.normalizer + std::int64_t(s) * d, state.stabilizer + s};
}

// ---------------------------------------------------------------------------------------------
// Recurrent form, one state head, token by token as DESIGN.md writes it.
//
// Precision: the arithmetic is double and the state is rounded to fp32 once per call. An output
// whose q̂ᵀn nearly cancels (|h| up to |q̂ᵀC|·e^{m}) magnifies any rounding of n by that
// cancellation, and one whose q̂ᵀC cancels magnifies the rounding of its sum; so for calls of more
// than one token C and n are carried in double (a heap copy) and rounded at the end, the places
// where the chunkwise form rounds. A one-token call (decode) updates the fp32 state in place, row
// by row, and allocates nothing.
void recurrent_state_head(const Inputs& in, int s, int n, StateSlice state) {
  const int d = in.shape.head_dim;
  const StateHeads heads = heads_of_state(in.shape, s);
  const double query_scale = 1.0 / std::sqrt(double(d));  // q̂ = q/√d
  const std::int64_t normalizer_offset = std::int64_t(d) * d;

  std::vector<double> carried;  // C then n, for calls of more than one token
  if (n > 1) {
    carried.assign(state.matrix, state.matrix + normalizer_offset);
    carried.insert(carried.end(), state.normalizer, state.normalizer + d);
  }
  std::array<double, kMaxHeadDim> row;                 // one row of C, or n
  std::array<double, kMaxGroupWidth> numerator;        // q̂ᵀC_t of the group's heads, [G, d]
  const auto load = [&](const float* stored, std::int64_t offset) {
    if (carried.empty()) std::copy_n(stored, d, row.begin());
    else std::copy_n(carried.begin() + offset, d, row.begin());
  };
  const auto store = [&](float* stored, std::int64_t offset) {
    if (carried.empty()) std::transform(row.begin(), row.begin() + d, stored, [](double x) { return float(x); });
    else std::copy_n(row.begin(), d, carried.begin() + offset);
  };

  float m = *state.stabilizer;
  for (int t = 0; t < n; ++t) {
    const LogGates gates = in.gates(t, s);
    const float next = next_stabilizer(m, gates);
    // f′ = exp(logf + m_{t−1} − m_t) with the difference of the stored fp32 stabilizers taken
    // first: when fp32 cannot resolve m_{t−1} + logf (logf ≈ −3e-7 next to |m| ≈ 15), m_t stays
    // put and f′ still carries the whole decay.
    const double forget_weight = std::exp(gates.log_forget + (double(m) - double(next)));
    const double input_weight = std::exp(gates.input - double(next));
    m = next;
    const float* key = in.key(t, heads.kv_head);
    const float* value = in.value(t, heads.kv_head);

    // C_t = f′C_{t−1} + i′ k vᵀ row by row, each row's term of q̂ᵀC_t added as it is done.
    std::fill_n(numerator.begin(), std::int64_t(heads.group) * d, 0.0);
    for (int a = 0; a < d; ++a) {
      load(state.matrix + std::int64_t(a) * d, std::int64_t(a) * d);
      const double key_weight = input_weight * key[a];
      for (int b = 0; b < d; ++b) row[b] = forget_weight * row[b] + key_weight * value[b];
      store(state.matrix + std::int64_t(a) * d, std::int64_t(a) * d);
      for (int g = 0; g < heads.group; ++g) {
        const double query_a = query_scale * in.query(t, heads.first_query + g)[a];
        double* head_numerator = numerator.data() + std::int64_t(g) * d;
        for (int b = 0; b < d; ++b) head_numerator[b] += query_a * row[b];
      }
    }

    // n_t = f′n_{t−1} + i′k_t, then h_t = q̂ᵀC_t / (max(|q̂ᵀn_t|, exp(−m_t)) + 1e-6).
    load(state.normalizer, normalizer_offset);
    for (int a = 0; a < d; ++a) row[a] = forget_weight * row[a] + input_weight * key[a];
    store(state.normalizer, normalizer_offset);
    for (int g = 0; g < heads.group; ++g) {
      const float* query = in.query(t, heads.first_query + g);
      double query_dot_normalizer = 0;
      for (int a = 0; a < d; ++a) query_dot_normalizer += double(query[a]) * row[a];
      const double scale = 1.0 / denominator(query_scale * query_dot_normalizer, m);
      const double* head_numerator = numerator.data() + std::int64_t(g) * d;
      float* h = in.output(t, heads.first_query + g);
      for (int b = 0; b < d; ++b) h[b] = float(head_numerator[b] * scale);
    }
  }

  *state.stabilizer = m;
  if (!carried.empty()) {
    const auto to_float = [](double x) { return float(x); };
    std::transform(carried.begin(), carried.begin() + normalizer_offset, state.matrix, to_float);
    std::transform(carried.begin() + normalizer_offset, carried.end(), state.normalizer, to_float);
  }
}

// ---------------------------------------------------------------------------------------------
// Chunkwise form, one state head.
//
// Derivation. Write C̄_t = e^{m_t} C_t, n̄_t = e^{m_t} n_t for the unstabilized state; the
// recurrence is then C̄_t = e^{logf_t} C̄_{t−1} + e^{ĩ_t} k_t v_tᵀ (multiply C_t = f′C_{t−1} + i′kvᵀ
// by e^{m_t}). Inside a chunk entered with (C_0, n_0, m_0), let b_τ = Σ_{u=1..τ} logf_u be the
// cumulative log forget gate (b_0 = 0). Unrolling,
//   C̄_τ = e^{b_τ + m_0} C_0 + Σ_{j≤τ} e^{b_τ − b_j + ĩ_j} k_j v_jᵀ,
// so with the log decay matrix D_τj = b_τ − b_j + ĩ_j (j ≤ τ, lower triangular) and any row
// stabilizer m_τ,
//   q̂ᵀC_τ = e^{b_τ + m_0 − m_τ} q̂ᵀC_0 + Σ_{j≤τ} e^{D_τj − m_τ} (q̂·k_j) v_j,   (same for n with v → 1).
// Unrolling m_t = max(logf_t + m_{t−1}, ĩ_t) the same way gives m_τ = max(b_τ + m_0, max_j D_τj):
// the recurrence's stabilizer is exactly the row maximum of the log weights, so every exponent
// above is ≤ 0 (nothing overflows, whatever the chunk length or gates) and the exp(−m_τ) term of
// the denominator is the recurrence's. m_τ is stepped with next_stabilizer in fp32, so it is the
// recurrent form's value bit for bit; b is summed in double, so b_τ − b_j keeps full precision
// even when b has run to −1900 over a chunk of saturated forget gates. The chunk's last row gives
// the state leaving it: C_L = e^{b_L + m_0 − m_L} C_0 + Σ_j e^{D_Lj − m_L} k_j v_jᵀ, n_L likewise,
// m_L. Within one call C and n are carried in double across chunks.
void chunkwise_state_head(const Inputs& in, int s, int n, int chunk_size, StateSlice state) {
  const int d = in.shape.head_dim;
  const StateHeads heads = heads_of_state(in.shape, s);
  const double query_scale = 1.0 / std::sqrt(double(d));
  const int rows = std::min(chunk_size, n);

  std::vector<double> matrix(state.matrix, state.matrix + std::int64_t(d) * d);
  std::vector<double> normalizer(state.normalizer, state.normalizer + d);
  std::vector<double> cumulative_log_forget(rows);       // b_τ
  std::vector<double> input(rows);                       // ĩ_τ
  std::vector<float> stabilizer(rows);                   // m_τ
  std::vector<double> entering_weight(rows);             // e^{b_τ + m_0 − m_τ}
  std::vector<double> weight(std::int64_t(rows) * rows);  // e^{D_τj − m_τ}, j ≤ τ
  std::vector<double> query(d), numerator(d);
  float entering_stabilizer = *state.stabilizer;  // m_0

  for (int chunk_start = 0; chunk_start < n; chunk_start += chunk_size) {
    const int count = std::min(chunk_size, n - chunk_start);

    // Log-space bookkeeping of the chunk: b_τ, ĩ_τ, m_τ, then the weights.
    double log_forget_sum = 0;
    float m = entering_stabilizer;
    for (int i = 0; i < count; ++i) {
      const LogGates gates = in.gates(chunk_start + i, s);
      m = next_stabilizer(m, gates);
      log_forget_sum += gates.log_forget;
      cumulative_log_forget[i] = log_forget_sum;
      input[i] = gates.input;
      stabilizer[i] = m;
    }
    for (int i = 0; i < count; ++i) {
      entering_weight[i] = std::exp(cumulative_log_forget[i] + entering_stabilizer - stabilizer[i]);
      for (int j = 0; j <= i; ++j)
        weight[std::int64_t(i) * rows + j] =
            std::exp(cumulative_log_forget[i] - cumulative_log_forget[j] + input[j] - stabilizer[i]);
    }

    // Outputs: the entering state's term plus the causal intra-chunk term.
    for (int g = 0; g < heads.group; ++g) {
      const int h = heads.first_query + g;
      for (int i = 0; i < count; ++i) {
        const int t = chunk_start + i;
        const float* q = in.query(t, h);
        for (int a = 0; a < d; ++a) query[a] = query_scale * q[a];
        std::fill(numerator.begin(), numerator.end(), 0.0);
        double query_dot_normalizer = 0;
        for (int a = 0; a < d; ++a) {
          const double* matrix_row = matrix.data() + std::int64_t(a) * d;
          for (int b = 0; b < d; ++b) numerator[b] += query[a] * matrix_row[b];
          query_dot_normalizer += query[a] * normalizer[a];
        }
        for (int b = 0; b < d; ++b) numerator[b] *= entering_weight[i];
        query_dot_normalizer *= entering_weight[i];
        for (int j = 0; j <= i; ++j) {
          const float* key = in.key(chunk_start + j, heads.kv_head);
          const float* value = in.value(chunk_start + j, heads.kv_head);
          double score = 0;
          for (int a = 0; a < d; ++a) score += query[a] * key[a];
          score *= weight[std::int64_t(i) * rows + j];
          for (int b = 0; b < d; ++b) numerator[b] += score * value[b];
          query_dot_normalizer += score;
        }
        const double scale = 1.0 / denominator(query_dot_normalizer, stabilizer[i]);
        float* out = in.output(t, h);
        for (int b = 0; b < d; ++b) out[b] = float(numerator[b] * scale);
      }
    }

    // The state leaving the chunk: row L of the same weights.
    const int last = count - 1;
    const double carry = entering_weight[last];
    const double* last_weights = weight.data() + std::int64_t(last) * rows;
    for (int a = 0; a < d; ++a) {
      double* matrix_row = matrix.data() + std::int64_t(a) * d;
      for (int b = 0; b < d; ++b) matrix_row[b] *= carry;
      normalizer[a] *= carry;
      for (int j = 0; j < count; ++j) {
        const double key_weight = last_weights[j] * in.key(chunk_start + j, heads.kv_head)[a];
        const float* value = in.value(chunk_start + j, heads.kv_head);
        for (int b = 0; b < d; ++b) matrix_row[b] += key_weight * value[b];
        normalizer[a] += key_weight;
      }
    }
    entering_stabilizer = stabilizer[last];
  }

  std::transform(matrix.begin(), matrix.end(), state.matrix, [](double x) { return float(x); });
  std::transform(normalizer.begin(), normalizer.end(), state.normalizer, [](double x) { return float(x); });
  *state.stabilizer = entering_stabilizer;
}

}  // namespace

std::int64_t mlstm_matrix_floats(const MlstmShape& shape) {
  return std::int64_t(shape.states) * shape.head_dim * shape.head_dim;
}

std::int64_t mlstm_normalizer_floats(const MlstmShape& shape) { return std::int64_t(shape.states) * shape.head_dim; }

std::int64_t mlstm_stabilizer_floats(const MlstmShape& shape) { return shape.states; }

void mlstm_check_shape(const MlstmShape& shape) {
  if (shape.kv_heads <= 0 || shape.states <= 0 || shape.query_heads <= 0 || shape.states % shape.kv_heads != 0 ||
      shape.query_heads % shape.states != 0)
    throw std::invalid_argument("mlstm: states (" + std::to_string(shape.states) + ") must be a multiple of KV heads (" +
                                std::to_string(shape.kv_heads) + ") and divide query heads (" +
                                std::to_string(shape.query_heads) + ")");
  if (shape.head_dim <= 0 || shape.head_dim > kMaxHeadDim)
    throw std::invalid_argument("mlstm: head dimension " + std::to_string(shape.head_dim) + " outside 1 … " +
                                std::to_string(kMaxHeadDim));
  if (std::int64_t(shape.query_heads / shape.states) * shape.head_dim > kMaxGroupWidth)
    throw std::invalid_argument("mlstm: query heads per state × head dimension exceeds " +
                                std::to_string(kMaxGroupWidth));
}

void mlstm_reset(const MlstmShape& shape, MlstmState state) {
  mlstm_check_shape(shape);
  std::fill_n(state.matrix, mlstm_matrix_floats(shape), 0.0f);
  std::fill_n(state.normalizer, mlstm_normalizer_floats(shape), 0.0f);
  std::fill_n(state.stabilizer, mlstm_stabilizer_floats(shape), 0.0f);
}

void mlstm_recurrent(const MlstmShape& shape, const float* q, const float* k, const float* v, const float* input_gate,
                     const float* forget_gate, int n, MlstmState state, float* out) {
  mlstm_check_shape(shape);
  if (n <= 0) return;
  const Inputs in{shape, q, k, v, input_gate, forget_gate, out};
  ThreadPool::global().parallel_for(shape.states, [&](std::int64_t s) {
    recurrent_state_head(in, int(s), n, slice_of(shape, state, int(s)));
  });
}

void mlstm_chunkwise(const MlstmShape& shape, const float* q, const float* k, const float* v, const float* input_gate,
                     const float* forget_gate, int n, int chunk_size, MlstmState state, float* out) {
  mlstm_check_shape(shape);
  if (chunk_size <= 0) throw std::invalid_argument("mlstm: chunk size must be positive");
  if (n <= 0) return;
  const Inputs in{shape, q, k, v, input_gate, forget_gate, out};
  ThreadPool::global().parallel_for(shape.states, [&](std::int64_t s) {
    chunkwise_state_head(in, int(s), n, chunk_size, slice_of(shape, state, int(s)));
  });
}

}  // namespace bifocal::cpu
