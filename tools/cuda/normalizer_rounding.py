"""How far the mLSTM's prefill denominators move when the attention's epilogue takes q̂_τ·n_τ from
n_τ rounded to floats (docs/notes/patches/stop74-normalizer-rows.patch), where kernel 3 keeps
n_τ in double (mlstm_prefill_denominators.cu). A host-side estimate, in double, on the inputs of
the GPU mix test (tests/cuda/bifocal_prefill_mix_test.cpp): q, k ~ N(0, 1), input gates
~ N(0, 1), forget gates ~ N(2, 3), d = 128. n_τ follows the stabilized recurrence
  m_τ = max(log f_τ + m_{τ−1}, ĩ_τ),  n_τ = e^{log f_τ + m_{τ−1} − m_τ} n_{τ−1} + e^{ĩ_τ − m_τ} k_τ,
and each row's inverse denominator 1 / (max(|q̂·n_τ|, e^{−m_τ}) + 1e-6) is rounded to a float
both ways. An output's bf16 rounding (spacing ~2^-8 of it) then falls the other way with about
the inverse's relative difference / 2^-8: the share the test bounds by 1/256. As a contrast, q
rounded to bf16 (the stop 73 patch's S took bf16 q and k) moves the inverse by orders more.
Run: python3 tools/cuda/normalizer_rounding.py [--trials 40] [--seed 1]
"""
import argparse
import math
import random
import struct


def to_float(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def to_bf16(x):  # round to nearest even on the float's top 16 bits
    bits = struct.unpack("I", struct.pack("f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", bits))[0]


def inverse(query, normalizer, floor, d):
    dot = sum(x * y for x, y in zip(query, normalizer)) / math.sqrt(d)
    return to_float(1.0 / (max(abs(dot), floor) + 1e-6))


def measure(d=128, tokens=150, heads=4, trials=40, seed=1):
    """Relative differences of the rows' inverse denominators: n_τ as floats, and q as bf16."""
    rng = random.Random(seed)
    float_rows, bf16_rows = [], []
    for _ in range(trials):
        normalizer, stabilizer = [0.0] * d, 0.0
        for _ in range(tokens):
            key = [rng.gauss(0, 1) for _ in range(d)]
            input_gate, forget_gate = rng.gauss(0, 1), rng.gauss(2, 3)
            log_forget = -math.log1p(math.exp(-forget_gate))
            new_stabilizer = max(log_forget + stabilizer, input_gate)
            decay, weight = math.exp(log_forget + stabilizer - new_stabilizer), math.exp(input_gate - new_stabilizer)
            normalizer = [decay * n + weight * k for n, k in zip(normalizer, key)]
            stabilizer = to_float(new_stabilizer)
            as_floats = [to_float(n) for n in normalizer]
            floor = math.exp(-stabilizer)
            for _ in range(heads):
                query = [to_float(rng.gauss(0, 1)) for _ in range(d)]
                exact = inverse(query, normalizer, floor, d)
                float_rows.append(abs(inverse(query, as_floats, floor, d) - exact) / exact)
                bf16_rows.append(abs(inverse([to_bf16(q) for q in query], normalizer, floor, d) - exact) / exact)
    return float_rows, bf16_rows


def flip_share(differences):
    """The expected share of outputs whose bf16 rounding (spacing ~2^-8) falls the other way."""
    return sum(v / 2**-8 for v in differences) / len(differences)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    float_rows, bf16_rows = measure(trials=args.trials, seed=args.seed)
    for name, values in (("n_τ as floats", float_rows), ("q as bf16 (contrast)", bf16_rows)):
        ordered, rows = sorted(values), len(values)
        differ = sum(v > 0 for v in values)
        print(f"{name}: {rows} rows, {differ} inverses differ; relative difference median "
              f"{ordered[rows // 2]:.2e}, 99.9% {ordered[int(rows * 0.999)]:.2e}, largest {ordered[-1]:.2e}; "
              f"expected share of outputs whose bf16 rounding flips {flip_share(values):.1e}")
    flips = flip_share(float_rows)
    assert flips < 1 / 256, f"n_τ as floats flips {flips:.1e} of the outputs: beyond the test's 1/256"
    assert max(float_rows) < 2**-12, "n_τ as floats moves an inverse denominator by more than 2^-12"


if __name__ == "__main__":
    main()
