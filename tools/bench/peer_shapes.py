"""What a PyTorch peer row is keyed by: bifocal's builtin shapes (and the synthetic config around
them), contexts, attentions and peers. Plain Python; no torch.

The shapes are read from src/mixer/budget.cpp and src/bench/bench_shapes.cpp when the source tree
is there, else from the copy kept here (test_peer_pytorch.py checks the copy against the source).
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from typing import Any, Optional

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUDGET_SOURCE = os.path.join("src", "mixer", "budget.cpp")
SYNTHETIC_SOURCE = os.path.join("src", "bench", "bench_shapes.cpp")

PEER_EAGER = "eager"
PEER_COMPILED = "compiled"
PEERS = (PEER_EAGER, PEER_COMPILED)
COMPILE_MODES = ("max-autotune-no-cudagraphs", "default", "reduce-overhead")


def log(message: str) -> None:
    print(f"peer: {message}", file=sys.stderr, flush=True)


def short_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200] if text else ''}"


# --------------------------------------------------------------------------------------------
# Shapes: bifocal's builtin ones (include/bifocal/budget.h) and its synthetic config around them
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    query_heads: int
    kv_heads: int
    head_dim: int
    native_window: int = 0


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
    """What bench_shapes.cpp adds to a shape to make a whole Qwen3 config."""
    rms_norm_eps: float
    rope_theta: float
    tie_word_embeddings: bool
    qk_norm: bool
    max_position_embeddings: int


# A copy of builtin_shapes() in src/mixer/budget.cpp and of synthetic_model_config() in
# src/bench/bench_shapes.cpp, for running where the source tree is absent. The source wins when
# present; test_peer_pytorch.py fails when the two disagree.
BUILTIN_SHAPES = {
    "qwen3-4b": ModelShape("qwen3-4b", 36, 2560, 9728, 151936, 32, 8, 128, 0),
    "qwen3.5-4b-like": ModelShape("qwen3.5-4b-like", 32, 2560, 9216, 151936, 16, 4, 256, 0),
    "paper-fig2": ModelShape("paper-fig2", 4, 1024, 4096, 32000, 16, 16, 64, 0),
}
SYNTHETIC_CONFIG = SyntheticConfig(rms_norm_eps=1e-6, rope_theta=1.0e6, tie_word_embeddings=True, qk_norm=True,
                                   max_position_embeddings=1 << 20)

_SHAPE_ENTRY = re.compile(
    r'\{\s*"([^"]+)"\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*\{\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\}\s*\}')


def parse_builtin_shapes(budget_cpp: str) -> dict[str, ModelShape]:
    """The shapes listed in builtin_shapes() of budget.cpp: {"name", layers, hidden,
    intermediate, vocab, {query_heads, kv_heads, head_dim, native_window}}."""
    start = budget_cpp.find("builtin_shapes()")
    if start < 0:
        raise ValueError("builtin_shapes() not found")
    end = budget_cpp.find("return shapes;", start)
    body = budget_cpp[start:end if end > 0 else len(budget_cpp)]
    body = re.sub(r"//[^\n]*", "", body)  # comments may quote shapes in prose
    shapes = {}
    for match in _SHAPE_ENTRY.finditer(body):
        name, *numbers = match.groups()
        shapes[name] = ModelShape(name, *map(int, numbers))
    if not shapes:
        raise ValueError("no shape entries found in builtin_shapes()")
    return shapes


def parse_synthetic_config(bench_shapes_cpp: str) -> SyntheticConfig:
    """The constants synthetic_model_config() sets; each must be found (no silent defaults)."""
    def value(pattern: str) -> str:
        match = re.search(pattern, bench_shapes_cpp)
        if not match:
            raise ValueError(f"bench_shapes.cpp: no match for {pattern!r}")
        return match.group(1)

    shift = value(r"max_position_embeddings\s*=\s*([^;]+);").strip()
    shift_match = re.fullmatch(r"1\s*<<\s*(\d+)", shift)
    max_positions = 1 << int(shift_match.group(1)) if shift_match else int(shift)
    return SyntheticConfig(
        rms_norm_eps=float(value(r"rms_norm_eps\s*=\s*([0-9.eE+-]+)\s*;")),
        rope_theta=float(value(r"rope\.theta\s*=\s*([0-9.eE+-]+)\s*;")),
        tie_word_embeddings=value(r"tie_word_embeddings\s*=\s*(true|false)\s*;") == "true",
        qk_norm=value(r"qk_norm\s*=\s*(true|false)\s*;") == "true",
        max_position_embeddings=max_positions)


def load_shapes(source_root: str = REPO_ROOT) -> tuple[dict[str, ModelShape], SyntheticConfig, str]:
    """(shapes, synthetic config, where they came from). The C++ source when it is readable."""
    budget_path = os.path.join(source_root, BUDGET_SOURCE)
    synthetic_path = os.path.join(source_root, SYNTHETIC_SOURCE)
    try:
        with open(budget_path, encoding="utf-8") as f:
            shapes = parse_builtin_shapes(f.read())
        with open(synthetic_path, encoding="utf-8") as f:
            synthetic = parse_synthetic_config(f.read())
    except (OSError, ValueError) as error:
        return dict(BUILTIN_SHAPES), SYNTHETIC_CONFIG, f"the copy in peer_shapes.py ({error})"
    if shapes != BUILTIN_SHAPES or synthetic != SYNTHETIC_CONFIG:
        log("warning: the shape table here differs from the C++ source; using the source")
    return shapes, synthetic, f"{BUDGET_SOURCE} and {SYNTHETIC_SOURCE}"


def qwen3_config_kwargs(shape: ModelShape, synthetic: SyntheticConfig, window: Optional[int] = None) -> dict[str, Any]:
    """Qwen3Config arguments matching bifocal's synthetic config (transformers' Qwen3 always has
    q/k RMSNorm, so qk_norm needs no flag). `window` makes every layer a sliding-window layer of
    that many tokens; the version-specific spelling is added by peer_models.build_config()."""
    if not synthetic.qk_norm:
        raise ValueError("bifocal's synthetic config has no q/k norm; transformers' Qwen3 always has it")
    kwargs: dict[str, Any] = dict(
        vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.query_heads,
        num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim, hidden_act="silu",
        max_position_embeddings=synthetic.max_position_embeddings, rms_norm_eps=synthetic.rms_norm_eps,
        tie_word_embeddings=synthetic.tie_word_embeddings, attention_bias=False, use_cache=True)
    if window is not None:
        # max_window_layers=0: layers i >= max_window_layers slide, i.e. all of them.
        kwargs.update(use_sliding_window=True, sliding_window=window, max_window_layers=0)
    else:
        kwargs.update(use_sliding_window=False)
    return kwargs


# --------------------------------------------------------------------------------------------
# Contexts, attentions, peers
# --------------------------------------------------------------------------------------------

def parse_contexts(text: str) -> list[int]:
    """"1k,8k,32k" -> [1024, 8192, 32768] (k = 1024, as `bifocal bench --context`); sorted, unique."""
    contexts = set()
    for item in text.split(","):
        item = item.strip()
        scale = 1
        if item[-1:] in ("k", "K"):
            scale, item = 1024, item[:-1]
        if not item.isdigit() or int(item) <= 0:
            raise ValueError(f"--context: {text!r} is not a comma-separated list of positive token counts "
                             "(e.g. 1k,8k,32k)")
        contexts.add(int(item) * scale)
    return sorted(contexts)


def context_label(tokens: int) -> str:
    return f"{tokens // 1024}K" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


def full_attention() -> str:
    return "full"


def sliding_attention(window: int) -> str:
    return f"sliding:window={window}"


def peer_label(peer: str, attention: str) -> str:
    return peer if attention == full_attention() else f"{peer}, {attention}"
