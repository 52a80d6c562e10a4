"""The compiled peer: a StaticCache, the decode step (forward + argmax) torch.compile'd and, unless
--compile-mode reduce-overhead, captured once as a CUDA graph that feeds its argmax back and
advances its positions, so a replay is a whole decode step with no host work (gpt-fast's pattern).

The write position. transformers 4.x writes a StaticCache at the cache_position it is given; 5.x
ignores cache_position and writes each layer at its own `cumulative_length`, a device tensor that
update() advances in place -- inside the compiled graph, so every call and every replay of the
captured graph moves it one slot on. Resetting our position tensors therefore does not bring the
cache back to the context length; CacheCursor snapshots every counter the cache keeps (device
tensors and Python ints) after the fill and rewinds them before every repeat, so each repeat
writes slots context .. context + gen - 1 and no more.

Nothing here imports torch at import time (it comes in through the Measurer).
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from peer_models import Measurer, RowSkipped, median_tokens_per_second, warmup_repeat_steps
from peer_shapes import ModelShape, short_error

CAPTURE_WARMUP_STEPS = 2   # steps on a side stream before a CUDA graph capture, as capture requires
CACHE_SLACK = 8            # spare slots beyond every step the row runs


def untimed_steps(gen: int) -> int:
    """Decode steps run before the first timed repeat: the compiling call, the capture warm-up
    and the warm-up repeat."""
    return 1 + CAPTURE_WARMUP_STEPS + warmup_repeat_steps(gen)


def static_cache_length(context: int, gen: int) -> int:
    """Slots of the compiled peer's StaticCache. With the cursor rewound before every repeat the
    last write is at context + gen - 1; the cache also has room for every untimed step on top, so
    a transformers version whose write position the cursor does not find still gets through the
    first timed repeat, after which counter_drift() stops the row before it could overrun."""
    return context + gen + untimed_steps(gen) + CACHE_SLACK


def cache_length_text(gen: int) -> str:
    return f"context + {gen} + {untimed_steps(gen) + CACHE_SLACK} slots"


def sliding_window_problem(context: int, gen: int, window: Optional[int]) -> Optional[str]:
    """Why a compiled sliding-window row cannot be measured, or None. The graph is compiled and
    captured in one branch of the sliding layer's update (window not yet full / full, a Python
    decision); a window that fills part-way through the timed steps would need the other branch."""
    if window is not None and context < window < context + gen:
        return (f"the window ({window}) would fill part-way through the {gen} steps from {context} tokens; "
                "the captured graph follows one branch of the sliding update only")
    return None


def counter_drift(saved: list[int], per_step: list[int], now: list[int], steps: int) -> Optional[str]:
    """After `steps` steps from a rewound cache, every tensor counter must sit at its filled value
    plus its per-step advance (learnt from the compiling call) times `steps`; a description of
    the first one that does not, else None."""
    for index, (start, step, current) in enumerate(zip(saved, per_step, now)):
        expected = start + step * steps
        if current != expected:
            return (f"cache counter {index} moved from {start} to {current} over {steps} steps (expected "
                    f"{expected}): the write position was not rewound; stopped before it overruns the cache")
    return None


class CacheCursor:
    """Every position counter a cache keeps, on the cache and on each layer: Python ints and
    one-element integer tensors, snapshot when made. rewind() puts them all back (tensors in
    place, so a captured graph's addresses stay valid); hold_ints() only the Python ones, which
    the compiled graph guards on."""

    def __init__(self, torch, cache):
        self.torch = torch
        self._ints: list[tuple[object, str, int]] = []
        self._tensors: list[tuple[object, str, object]] = []
        for owner in [cache, *list(getattr(cache, "layers", None) or [])]:
            for name, value in list(getattr(owner, "__dict__", {}).items()):
                if isinstance(value, bool):
                    continue
                if isinstance(value, int):
                    self._ints.append((owner, name, value))
                elif (isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point()
                      and not value.is_complex() and value.dtype != torch.bool):
                    self._tensors.append((owner, name, value.detach().clone()))
        self.saved = self.positions()

    def tensor_names(self) -> list[str]:
        return [name for _, name, _ in self._tensors]

    def positions(self) -> list[int]:
        """The tensor counters now (reads the device: outside timed regions only)."""
        return [int(getattr(owner, name).item()) for owner, name, _ in self._tensors]

    def advance(self) -> list[int]:
        return [now - saved for now, saved in zip(self.positions(), self.saved)]

    def moved_ints(self) -> list[str]:
        return sorted({name for owner, name, value in self._ints if getattr(owner, name, value) != value})

    def hold_ints(self) -> None:
        for owner, name, value in self._ints:
            setattr(owner, name, value)

    def rewind(self) -> None:
        self.hold_ints()
        for owner, name, snapshot in self._tensors:
            current = getattr(owner, name, None)
            if isinstance(current, self.torch.Tensor) and current.shape == snapshot.shape:
                current.copy_(snapshot)
            else:
                setattr(owner, name, snapshot.clone())


def capture(torch, step: Callable, token, position, position_ids, reset: Callable, hold_ints: Callable):
    """A CUDA graph of one decode step that writes its argmax into `token` and advances the
    positions: warm-up on a side stream (as capture requires), each warm-up step undone, then
    capture from the rewound state."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(CAPTURE_WARMUP_STEPS):
            step()
            reset()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    reset()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        next_token = step()
        token.copy_(next_token)
        position.add_(1)
        position_ids.add_(1)
    hold_ints()  # tracing replays the Python side effects; no kernel ran, so the tensors did not move
    return graph


def compiled_row(m: Measurer, model, shape: ModelShape, context: int, window: Optional[int]) -> dict:
    """StaticCache + torch.compile'd decode step, timed over --repeat repeats each rewound to
    `context`. Raises RowSkipped when compiling or capturing fails."""
    torch = m.torch
    settings = m.settings
    problem = sliding_window_problem(context, settings.gen, window)
    if problem:
        raise RowSkipped(problem)
    notes = []
    max_cache_len = static_cache_length(context, settings.gen)
    before = torch.cuda.memory_allocated()
    cache = m.static_cache(model.config, max_cache_len)
    if window is not None and "Sliding" not in m.layer_kinds(cache):
        raise RowSkipped(f"this transformers' StaticCache has no sliding layers ({m.layer_kinds(cache)})")
    m.fill(model, cache, shape, context, static=True)
    torch.cuda.synchronize()
    cache_bytes = torch.cuda.memory_allocated() - before
    notes.append(f"cache: {m.layer_kinds(cache)}, {max_cache_len} slots")
    cursor = CacheCursor(torch, cache)  # the filled state every repeat starts from
    with_cache_position = m.forward_accepts_cache_position(model)

    token = torch.randint(0, shape.vocab, (1, 1), device=m.device)
    position = torch.full((1,), context, device=m.device, dtype=torch.long)
    position_ids = position.view(1, 1).clone()

    def decode_step(token, position_ids, position):
        inputs = dict(input_ids=token, position_ids=position_ids, past_key_values=cache, use_cache=True)
        if with_cache_position:
            inputs["cache_position"] = position
        return model(**inputs).logits[:, -1:].argmax(dim=-1)

    def reset() -> None:
        """Back to the filled state: the cache's counters and our positions at `context`."""
        cursor.rewind()
        position.fill_(context)
        position_ids.fill_(context)

    compiled = torch.compile(decode_step, mode=settings.compile_mode, dynamic=False)
    started = time.perf_counter()
    try:
        compiled(token, position_ids, position)  # compiles
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception as error:  # noqa: BLE001 -- reported as the row's reason
        raise RowSkipped(f"torch.compile failed: {short_error(error)}") from error
    compile_seconds = time.perf_counter() - started

    per_step = cursor.advance()
    moving = [name for name, step in zip(cursor.tensor_names(), per_step) if step]
    if moving:
        notes.append(f"write position: {moving[0]} (device tensor) ×{len(moving)}, rewound before every repeat")
    elif not with_cache_position:
        notes.append("no write-position counter found in the cache and no cache_position taken: "
                     f"the {max_cache_len - context - settings.gen} spare slots are the only guard")
    if cursor.moved_ints():
        notes.append(f"Python-side cache counters ({', '.join(cursor.moved_ints())}) are held at their filled "
                     "values so the graph is compiled once: a sliding mask's window offset does not advance "
                     "(timing only)")
    reset()

    mark_step = getattr(torch.compiler, "cudagraph_mark_step_begin", None)

    def python_step() -> None:
        """One step dispatched from Python: the compiled function, then the feedback."""
        if mark_step:
            mark_step()  # torch's CUDA graphs may reuse the previous step's output buffers
        next_token = compiled(token, position_ids, position)
        token.copy_(next_token)
        position.add_(1)
        position_ids.add_(1)
        cursor.hold_ints()

    if settings.compile_mode == "reduce-overhead":
        one_step = python_step
        notes.append("reduce-overhead: torch's own CUDA graphs, Python dispatch per step")
    else:
        try:
            graph = capture(torch, lambda: compiled(token, position_ids, position), token, position, position_ids,
                            reset, cursor.hold_ints)
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as error:  # noqa: BLE001 -- reported as the row's reason
            raise RowSkipped(f"CUDA graph capture failed: {short_error(error)}") from error
        one_step = graph.replay
        notes.append(f"{settings.compile_mode} + one captured CUDA graph per step")

    step_ms = []
    for repeat in range(settings.repeat + 1):  # repeat 0 warms up and is not counted
        steps = warmup_repeat_steps(settings.gen) if repeat == 0 else settings.gen
        reset()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(steps):
            one_step()
        end.record()
        end.synchronize()
        drift = counter_drift(cursor.saved, per_step, cursor.positions(), steps)
        if drift:
            raise RowSkipped(drift)
        if repeat > 0:
            step_ms.append(start.elapsed_time(end) / steps)
    return {"step_ms": step_ms, "decode_tokens_per_second": median_tokens_per_second(step_ms),
            "cache_bytes": cache_bytes, "cache_slots": max_cache_len, "compile_seconds": round(compile_seconds, 1),
            "notes": notes}
