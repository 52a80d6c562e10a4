"""Tiny random-initialised HF models and their reference outputs (model parity fixtures).

Run on the GPU machine after make_tokenizers.py (the models use its qwen2_bytelevel tokenizer):
    python3 tools/golden/make_models.py OUT_DIR
Writes OUT_DIR/models/<name>/ (save_pretrained output + tokenizer files) and
OUT_DIR/models/<name>/reference.safetensors with:
  input_ids      int64 [T]        the prompt (T >= 64)
  greedy_ids     int64 [16]       16 greedy continuation tokens
  logits         float32 [T+16, V] logits of the whole sequence (prompt + greedy tokens)
  logits_native  float32 [T, V]   prompt logits computed in the checkpoint's own dtype

The reference logits come from the saved weights upcast to float64 and run with eager
attention on the CPU, so they are the exact function of the stored (possibly bf16) weights.
Greedy tokens are picked from those float64 logits by re-running the full sequence each step
(no KV cache), so the reference does not depend on HF's cache code.
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from transformers import (AutoModelForCausalLM, LlamaConfig, MistralConfig, PreTrainedTokenizerFast, Qwen2Config,
                          Qwen3Config)

PROMPT = ("The engine loads a checkpoint, runs the layers one by one, and writes the next token. "
          "It's tested against the reference: 1234 + 5678 = 6912.\n\tdef f(x): return x * 2\n"
          "Numbers, names and code all go through the same byte-level tokenizer, "
          "so the prompt mixes them on purpose.")

COMMON = dict(hidden_act="silu", rms_norm_eps=1e-6, initializer_range=0.08, max_position_embeddings=512,
              attention_dropout=0.0, bos_token_id=None, eos_token_id=0, pad_token_id=None)


def specs(vocab):
    return {
        # fp32, untied, llama3 RoPE scaling, sharded safetensors
        "llama_fp32_sharded": (LlamaConfig, torch.float32, dict(
            vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=False,
            rope_theta=50000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                              "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
            attention_bias=False, mlp_bias=False), "60KB"),
        # fp16, sliding window 16 honoured on every layer
        "mistral_fp16_swa": (MistralConfig, torch.float16, dict(
            vocab_size=vocab, hidden_size=96, intermediate_size=192, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=24, tie_word_embeddings=False,
            rope_theta=10000.0, sliding_window=16), None),
        # fp32, qkv bias, tied embeddings, sliding window on layers >= 1
        "qwen2_fp32_tied": (Qwen2Config, torch.float32, dict(
            vocab_size=vocab, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
            rope_theta=1000000.0, use_sliding_window=True, sliding_window=24, max_window_layers=1), None),
        # bf16, q/k RMSNorm, explicit head_dim != hidden/heads
        "qwen3_bf16": (Qwen3Config, torch.bfloat16, dict(
            vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=48, tie_word_embeddings=False,
            rope_theta=1000000.0, attention_bias=False), None),
    }


def with_eager(model):
    try:
        model.set_attn_implementation("eager")
    except Exception:  # older transformers
        model.config._attn_implementation = "eager"
    return model


def main():
    out_dir = sys.argv[1]
    tok_dir = os.path.join(out_dir, "tokenizers", "qwen2_bytelevel")
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tok_dir)
    vocab = len(tokenizer) + 23  # checkpoints often pad the embedding beyond the tokenizer
    input_ids = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    assert len(input_ids) >= 64, len(input_ids)
    torch.manual_seed(20261129)
    for name, (config_cls, dtype, kwargs, shard) in specs(vocab).items():
        config = config_cls(**COMMON, **kwargs)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model = model.to(dtype)
        d = os.path.join(out_dir, "models", name)
        os.makedirs(d, exist_ok=True)
        if shard:
            model.save_pretrained(d, max_shard_size=shard)
        else:
            model.save_pretrained(d)
        for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            if os.path.exists(os.path.join(tok_dir, f)):
                shutil.copy(os.path.join(tok_dir, f), d)
        # Reload exactly what was written, so the reference is a function of the stored bytes.
        reloaded = AutoModelForCausalLM.from_pretrained(d, dtype=dtype)
        native = with_eager(reloaded).eval()
        exact = with_eager(AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64)).eval()
        ids = torch.tensor([input_ids])
        with torch.no_grad():
            logits_native = native(ids).logits[0].float()
            seq = ids
            for _ in range(16):
                nxt = exact(seq).logits[0, -1].argmax()
                seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
            logits = exact(seq).logits[0].float()
        greedy = seq[0, len(input_ids):]
        save_file({"input_ids": torch.tensor(input_ids, dtype=torch.int64), "greedy_ids": greedy.clone(),
                   "logits": logits.contiguous(), "logits_native": logits_native.contiguous()},
                  os.path.join(d, "reference.safetensors"))
        with open(os.path.join(d, "config.json")) as f:
            saved = json.load(f)
        print(f"{name}: {sum(p.numel() for p in model.parameters())} params, dtype {dtype}, T={len(input_ids)}, "
              f"greedy {greedy.tolist()}, max|native-exact| "
              f"{(logits_native - logits[:len(input_ids)]).abs().max().item():.4g}, "
              f"files {sorted(os.listdir(d))}")
        print("   config:", json.dumps(saved, sort_keys=True))


if __name__ == "__main__":
    main()
