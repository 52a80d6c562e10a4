"""Building the peers' models and caches on the GPU, and the eager peer's timed loop.

torch and transformers are imported when a Measurer is made, never at import time, so the rest of
tools/bench (and its tests) runs without them. peer_compiled.py adds the compiled peer.
"""

from __future__ import annotations

import dataclasses
import inspect
import statistics
from typing import Optional

from peer_shapes import ModelShape, SyntheticConfig, qwen3_config_kwargs

# Repeat 0 of every peer warms up with this many steps (at most --gen) and is not counted.
WARMUP_REPEAT_STEPS = 4


@dataclasses.dataclass(frozen=True)
class Settings:
    """The flags a measurement needs (what peer_pytorch.py passes to each row's process)."""
    gen: int = 128
    repeat: int = 3
    compile_mode: str = "max-autotune-no-cudagraphs"
    fill: str = "random"
    prefill_chunk: int = 4096
    seed: int = 1


class RowSkipped(Exception):
    """A row that cannot be measured as asked; its message is the reason in the report."""


def median_tokens_per_second(step_ms: list[float]) -> float:
    return 1000.0 / statistics.median(step_ms)


def warmup_repeat_steps(gen: int) -> int:
    return min(gen, WARMUP_REPEAT_STEPS)


class Measurer:
    """Builds models and caches and times the eager peer. One instance per process."""

    def __init__(self, settings: Settings, synthetic: SyntheticConfig):
        import torch
        import transformers
        self.torch = torch
        self.transformers = transformers
        self.settings = settings
        self.synthetic = synthetic
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device")
        self.device = torch.device("cuda")

    # ---- versions and device ----
    def meta(self) -> dict:
        torch = self.torch
        try:
            import triton
            triton_version = triton.__version__
        except Exception:  # noqa: BLE001 -- reported, not needed
            triton_version = "not installed"
        return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
                "transformers": self.transformers.__version__, "triton": triton_version}

    # ---- model ----
    def build_config(self, shape: ModelShape, window: Optional[int]):
        """Qwen3Config for the shape, spelled for the installed transformers: rope_parameters
        (5.x) or rope_theta (4.x); an explicit all-sliding layer_types where it exists."""
        from transformers import Qwen3Config
        kwargs = qwen3_config_kwargs(shape, self.synthetic, window)
        accepted = inspect.signature(Qwen3Config).parameters
        if "rope_parameters" in accepted:
            kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": self.synthetic.rope_theta}
        else:
            kwargs["rope_theta"] = self.synthetic.rope_theta
        if "layer_types" in accepted:
            kind = "full_attention" if window is None else "sliding_attention"
            kwargs["layer_types"] = [kind] * shape.layers
        return Qwen3Config(**kwargs)

    def build_model(self, shape: ModelShape, window: Optional[int]):
        """Random bf16 weights, initialised on the GPU (a 4B model on the CPU in fp32 would take
        16 GB and most of a minute)."""
        torch = self.torch
        from transformers import Qwen3ForCausalLM
        config = self.build_config(shape, window)
        torch.manual_seed(self.settings.seed)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            with torch.device(self.device):
                model = Qwen3ForCausalLM(config)
        finally:
            torch.set_default_dtype(previous)
        model = model.to(device=self.device, dtype=torch.bfloat16).eval().requires_grad_(False)
        # Constructed directly, a model may keep the config's default (eager); attention_report()
        # reads back what it got.
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("sdpa")
        else:
            model.config._attn_implementation = "sdpa"
        return model

    def attention_report(self, model, window: Optional[int]) -> tuple[bool, str]:
        """Whether the model attends as asked, read back from its modules (the config flags have
        changed between transformers versions): (ok, description)."""
        config = model.config
        implementation = getattr(config, "_attn_implementation", "?")
        layers = model.model.layers
        if window is None:
            return implementation == "sdpa", f"attn_implementation={implementation}"
        sliding = sum(1 for layer in layers if getattr(layer.self_attn, "sliding_window", None) == window)
        layer_types = getattr(config, "layer_types", None)
        how = (f"layer_types=sliding_attention ×{sum(t == 'sliding_attention' for t in layer_types)}"
               if layer_types is not None else "use_sliding_window=True, max_window_layers=0 (no layer_types)")
        description = (f"{how}, sliding_window={getattr(config, 'sliding_window', None)}; "
                       f"{sliding}/{len(layers)} attention modules slide; attn_implementation={implementation}")
        return sliding == len(layers) and implementation == "sdpa", description

    # ---- caches ----
    def layer_kinds(self, cache) -> str:
        layers = getattr(cache, "layers", None)
        if not layers:
            return type(cache).__name__
        names = [type(layer).__name__ for layer in layers]
        return ", ".join(f"{name} ×{names.count(name)}" for name in dict.fromkeys(names))

    def dynamic_cache(self, config):
        """DynamicCache that knows the layer types (5.x, 4.56+: sliding layers keep W - 1 tokens);
        older ones take no config and keep every token, the window then being a mask only."""
        from transformers import DynamicCache
        try:
            return DynamicCache(config=config), ""
        except TypeError:
            return DynamicCache(), "this DynamicCache takes no config: it keeps the whole context"

    def static_cache(self, config, max_cache_len: int):
        from transformers import StaticCache
        torch = self.torch
        # 4.4x wants batch, device and dtype too; 5.x allocates lazily from the first update and
        # may or may not still swallow those arguments.
        try:
            return StaticCache(config=config, max_batch_size=1, max_cache_len=max_cache_len, device=self.device,
                               dtype=torch.bfloat16)
        except TypeError:
            return StaticCache(config=config, max_cache_len=max_cache_len)

    def fill_random(self, cache, shape: ModelShape, context: int, static: bool) -> None:
        """Random keys/values for `context` positions through the cache's own update(), as if a
        prompt had been processed (bifocal bench fills its caches the same way). transformers 5.x
        ignores the cache_position passed here and writes at the layer's own counter, from 0."""
        torch = self.torch
        generator = torch.Generator(device=self.device).manual_seed(self.settings.seed)
        kwargs = {"cache_position": torch.arange(context, device=self.device)} if static else {}
        for layer in range(shape.layers):
            keys = torch.randn((1, shape.kv_heads, context, shape.head_dim), device=self.device, dtype=torch.bfloat16,
                               generator=generator)
            values = torch.randn_like(keys)
            cache.update(keys, values, layer, kwargs)
            del keys, values

    def fill_prefill(self, model, cache, context: int) -> None:
        """A chunked prefill of random tokens through the base model (no LM head: its logits for a
        long prompt would not fit)."""
        torch = self.torch
        generator = torch.Generator(device=self.device).manual_seed(self.settings.seed)
        tokens = torch.randint(0, model.config.vocab_size, (1, context), device=self.device, generator=generator)
        with_cache_position = self.forward_accepts_cache_position(model)
        for start in range(0, context, self.settings.prefill_chunk):
            end = min(context, start + self.settings.prefill_chunk)
            positions = torch.arange(start, end, device=self.device)
            inputs = dict(input_ids=tokens[:, start:end], position_ids=positions.unsqueeze(0), past_key_values=cache,
                          use_cache=True)
            if with_cache_position:
                inputs["cache_position"] = positions
            model.model(**inputs)

    def fill(self, model, cache, shape: ModelShape, context: int, static: bool) -> None:
        if self.settings.fill == "prefill":
            self.fill_prefill(model, cache, context)
        else:
            self.fill_random(cache, shape, context, static)

    def forward_accepts_cache_position(self, model) -> bool:
        # transformers 5.x dropped cache_position from the forwards (the caches keep their own
        # write position); 4.x still takes it.
        return "cache_position" in inspect.signature(model.forward).parameters

    # ---- the eager peer ----
    def eager_row(self, model, shape: ModelShape, context: int) -> dict:
        """Python loop of forward + argmax with a DynamicCache, each repeat on a freshly filled
        cache; the positions advance on the device, as generate() advances them."""
        torch = self.torch
        with_cache_position = self.forward_accepts_cache_position(model)
        notes = []
        step_ms = []
        cache_kinds = ""
        cache_bytes = 0
        for repeat in range(self.settings.repeat + 1):  # repeat 0 warms up and is not counted
            steps = warmup_repeat_steps(self.settings.gen) if repeat == 0 else self.settings.gen
            before = torch.cuda.memory_allocated()
            cache, cache_note = self.dynamic_cache(model.config)
            self.fill(model, cache, shape, context, static=False)
            cache_bytes = torch.cuda.memory_allocated() - before
            if cache_note and cache_note not in notes:
                notes.append(cache_note)
            token = torch.randint(0, shape.vocab, (1, 1), device=self.device)
            position = torch.full((1,), context, device=self.device, dtype=torch.long)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(steps):
                inputs = dict(input_ids=token, position_ids=position.unsqueeze(0), past_key_values=cache, use_cache=True)
                if with_cache_position:
                    inputs["cache_position"] = position
                logits = model(**inputs).logits
                token = logits[:, -1:].argmax(dim=-1)
                position = position + 1
            end.record()
            end.synchronize()
            if repeat > 0:
                step_ms.append(start.elapsed_time(end) / steps)
            cache_kinds = self.layer_kinds(cache)
            del cache, logits
        notes.append(f"cache: {cache_kinds}")
        return {"step_ms": step_ms, "decode_tokens_per_second": median_tokens_per_second(step_ms),
                "cache_bytes": cache_bytes, "notes": notes}
