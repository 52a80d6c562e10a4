"""bifocal's bench.json beside the PyTorch peer rows: matching (shape, context, attention), the
bifocal / peer ratios, and peer.md / peer.json. Plain Python; no torch."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Iterable, Optional

from peer_shapes import (PEER_COMPILED, PEER_EAGER, PEERS, context_label, full_attention, peer_label,
                         sliding_attention)

# --------------------------------------------------------------------------------------------
# Mixers and bench.json
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Mixer:
    """A bifocal mixer spec reduced to what the peers can match: its kind and window."""
    kind: str                 # full, swa, bifocal, mlstm, linear, lolcats
    window: Optional[int]
    options: tuple[tuple[str, str], ...]  # every key=value of the spec, for notes
    text: str


def parse_mixer(text: str) -> Mixer:
    kind, _, rest = text.partition(":")
    options = []
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        options.append((key.strip(), value.strip()))
    window = next((int(value) for key, value in options if key == "window"), None)
    return Mixer(kind.strip(), window, tuple(options), text)


def peer_attention_for(mixer: Mixer) -> tuple[str, bool, str]:
    """(the peer attention a bifocal mixer is compared with, like-for-like?, note).
    full <-> full; swa:window=W <-> sliding window W; every other mixer is set beside full
    attention, the only PyTorch peer there is for it, and says so."""
    if mixer.kind == "full":
        return full_attention(), True, ""
    if mixer.kind == "swa" and mixer.window:
        notes = []
        options = dict(mixer.options)
        sinks = options.get("sinks")
        if sinks is None and "sink" not in options:
            sinks = "4"  # swa's default (mixer_spec.cpp)
        if sinks and sinks != "0":
            notes.append(f"bifocal keeps {sinks} sink tokens inside the window; the peer has none")
        if options.get("sink") == "learned":
            notes.append("bifocal's learned sink adds one logit per head; the peer has none")
        if options.get("positions") == "rolling":
            notes.append("bifocal uses rolling positions; the peer absolute ones")
        return sliding_attention(mixer.window), True, "; ".join(notes)
    return full_attention(), False, f"no PyTorch peer for {mixer.kind}: compared with full attention"


@dataclasses.dataclass
class BifocalRow:
    shape: str          # bench.json "model": the shape name (or a checkpoint directory)
    mixer: str
    context: int
    decode_tokens_per_second: float
    dtype: str
    generated_tokens: int
    repeats: int
    device: str
    source: str         # the bench.json it came from


def load_bifocal_json(path: str) -> list[BifocalRow]:
    """The rows of one `bifocal bench --out` bench.json (src/bench/bench_report.cpp bench_json())."""
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    for key in ("model", "rows"):
        if key not in report:
            raise ValueError(f"{path}: not a bifocal bench.json (no '{key}')")
    rows = []
    for row in report["rows"]:
        rows.append(BifocalRow(shape=str(report["model"]), mixer=str(row["mixer"]), context=int(row["context"]),
                               decode_tokens_per_second=float(row["decode_tokens_per_second"]),
                               dtype=str(report.get("dtype", "")), generated_tokens=int(report.get("generated_tokens", 0)),
                               repeats=int(report.get("repeats", 0)), device=str(report.get("device", "")), source=path))
    return rows


def windows_in(bifocal_rows: Iterable[BifocalRow]) -> list[int]:
    """The sliding windows the peers need to cover the bifocal rows: those of swa mixers."""
    windows = set()
    for row in bifocal_rows:
        mixer = parse_mixer(row.mixer)
        if mixer.kind == "swa" and mixer.window:
            windows.add(mixer.window)
    return sorted(windows)


def builtin_name(shape: str, known: Iterable[str]) -> Optional[str]:
    """A bench.json's model as a builtin shape name: the name itself, else the last path part
    (so `--model models/qwen3-4b` still matches); None when it is no builtin shape."""
    known = set(known)
    if shape in known:
        return shape
    base = os.path.basename(os.path.normpath(shape))
    return base if base in known else None


def match_rows(bifocal_rows: list[BifocalRow], peer_rows: list[dict], known_shapes: Iterable[str]) -> list[dict]:
    """One comparison per bifocal row: for each peer, the peer row of the same shape, context and
    matching attention (peer_attention_for), its tok/s and bifocal/peer. Peer rows that were
    skipped give no ratio but carry their reason."""
    known_shapes = list(known_shapes)
    index = {(r["shape"], r["peer"], r["attention"], r["context"]): r for r in peer_rows}
    comparisons = []
    for row in bifocal_rows:
        mixer = parse_mixer(row.mixer)
        attention, like_for_like, note = peer_attention_for(mixer)
        shape = builtin_name(row.shape, known_shapes)
        notes = [note] if note else []
        if shape is None:
            notes.append(f"'{row.shape}' is no builtin shape: no peer")
        if row.dtype and row.dtype != "bf16":
            notes.append(f"bifocal ran {row.dtype}, the peers bf16")
        peers = {}
        for peer in PEERS:
            found = index.get((shape, peer, attention, row.context)) if shape else None
            if found is None:
                peers[peer] = {"status": "missing", "reason": "not measured"}
            elif found.get("status") != "ok":
                peers[peer] = {"status": found.get("status", "skipped"), "reason": found.get("reason", "")}
            else:
                speed = found["decode_tokens_per_second"]
                peers[peer] = {"status": "ok", "decode_tokens_per_second": speed,
                               "ratio": row.decode_tokens_per_second / speed if speed > 0 else None}
        comparisons.append({"shape": shape or row.shape, "bifocal_mixer": row.mixer, "context": row.context,
                            "bifocal_tokens_per_second": row.decode_tokens_per_second,
                            "peer_attention": attention, "like_for_like": like_for_like, "peers": peers,
                            "notes": notes, "bifocal_json": row.source})
    return comparisons


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

def fill_description(fill: str, prefill_chunk: int) -> str:
    return "random K/V" if fill == "random" else f"a prefill of random tokens ({prefill_chunk} per forward)"


def peer_descriptions(cache_slack: str) -> dict[str, str]:
    """What each peer is, for the report; `cache_slack` says how the static cache is sized."""
    return {
        PEER_EAGER: "transformers Qwen3ForCausalLM, attn_implementation=\"sdpa\", DynamicCache; a Python loop of "
                    "forward + argmax per token with positions advanced on the device (generate()'s per-step work "
                    "without its logits processors and stopping checks, so at least as fast as generate()). With a "
                    "window W every layer is a sliding-window layer (see each row's setup in peer.json).",
        PEER_COMPILED: f"StaticCache of {cache_slack}, the decode step (forward + argmax) torch.compile'd and, "
                       "unless --compile-mode reduce-overhead, captured once as a CUDA graph that feeds its token "
                       "back and advances its positions, replayed per token (the gpt-fast pattern). The cache's "
                       "write position is rewound to the context length before every repeat. Attention runs over "
                       "every slot of the static cache, as gpt-fast's does.",
    }


def format_speed(value: Optional[float]) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.1f}"


def format_ratio(value: Optional[float]) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.2f}×"


def cell(text: str) -> str:
    """Table-safe text: pipes would split the cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def peer_table(peer_rows: list[dict]) -> str:
    lines = ["| shape | peer | attention | context | decode tok/s | ms/token | notes |",
             "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    for r in peer_rows:
        ok = r.get("status") == "ok"
        speed = r.get("decode_tokens_per_second") if ok else None
        notes = list(r.get("notes", []))
        if not ok:
            notes.insert(0, f"skipped: {r.get('reason', '')}")
        lines.append(f"| {r['shape']} | {r['peer']} | {r['attention']} | {context_label(r['context'])} | "
                     f"{format_speed(speed)} | {format_speed(1000.0 / speed) if speed else '—'} | "
                     f"{cell('; '.join(notes))} |")
    return "\n".join(lines) + "\n"


def peer_cell(entry: dict) -> tuple[str, str]:
    """(tok/s cell, ratio cell) of one peer in a comparison."""
    if entry["status"] == "ok":
        return format_speed(entry["decode_tokens_per_second"]), format_ratio(entry.get("ratio"))
    if entry["status"] == "missing":
        return "—", "—"
    return f"skipped: {cell(entry.get('reason', ''))}", "—"


def comparison_table(comparisons: list[dict]) -> str:
    lines = ["| shape | bifocal mixer | context | bifocal tok/s | peer attention | eager tok/s | bifocal / eager | "
             "compiled tok/s | bifocal / compiled | notes |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
    for c in comparisons:
        eager_speed, eager_ratio = peer_cell(c["peers"][PEER_EAGER])
        compiled_speed, compiled_ratio = peer_cell(c["peers"][PEER_COMPILED])
        attention = c["peer_attention"] + ("" if c["like_for_like"] else " (not like for like)")
        lines.append(f"| {c['shape']} | `{c['bifocal_mixer']}` | {context_label(c['context'])} | "
                     f"{format_speed(c['bifocal_tokens_per_second'])} | {attention} | {eager_speed} | {eager_ratio} | "
                     f"{compiled_speed} | {compiled_ratio} | {cell('; '.join(c['notes']))} |")
    return "\n".join(lines) + "\n"


def render_markdown(meta: dict, peer_rows: list[dict], comparisons: list[dict]) -> str:
    md = [f"# PyTorch peers of `bifocal bench`: {', '.join(meta.get('shapes', []))} (bf16), {meta.get('device', '?')}",
          "",
          f"torch {meta.get('torch', '?')} (CUDA {meta.get('cuda', '?')}), transformers {meta.get('transformers', '?')}, "
          f"triton {meta.get('triton', '?')}; {meta.get('date', '?')}.",
          "",
          "```", meta.get("command", ""), "```",
          "",
          f"Batch 1, random bf16 weights of bifocal's builtin shapes ({meta.get('shape_source', '?')}). "
          f"Decode tok/s = 1 / (median over {meta.get('repeats', '?')} repeats of the mean time of "
          f"{meta.get('generated_tokens', '?')} greedy steps, CUDA events); each repeat starts at the context "
          f"length. Cache filled with {meta.get('fill', '?')}. Every row ran in a fresh process.",
          ""]
    for name, description in meta.get("peer_descriptions", {}).items():
        md.append(f"* **{name}**: {description}")
    # How the installed transformers was made to attend as asked (its flags differ by version).
    setups = {(r["shape"], r["attention"]): r["attention_setup"] for r in peer_rows if r.get("attention_setup")}
    if setups:
        md += ["", "Attention as built by the installed transformers:"]
        md += [f"* {shape}, {attention}: {setup}" for (shape, attention), setup in setups.items()]
    md += ["", "## Peer decode throughput", "", peer_table(peer_rows)]
    if comparisons:
        md += ["## bifocal / peer", "",
               "bifocal's decode tok/s (from its bench.json) over the peer's, same shape and context; "
               "full ↔ full attention, `swa:window=W` ↔ sliding window W. A ratio above 1 is bifocal faster.", "",
               comparison_table(comparisons)]
    return "\n".join(md)


def document(meta: dict, peer_rows: list[dict], comparisons: list[dict], bifocal_json: list[str],
             partial: bool) -> dict:
    """peer.json; `partial` while rows are still being measured."""
    return {"meta": meta, "partial": partial, "peer_rows": peer_rows, "comparisons": comparisons,
            "bifocal_json": bifocal_json}


def write_outputs(out_dir: str, markdown: str, peer_json: dict) -> None:
    """peer.md and peer.json, each written whole to a temporary name and renamed, so a run killed
    mid-write still leaves the previous complete files."""
    os.makedirs(out_dir, exist_ok=True)
    for name, text in (("peer.md", markdown), ("peer.json", json.dumps(peer_json, indent=2) + "\n")):
        path = os.path.join(out_dir, name)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
