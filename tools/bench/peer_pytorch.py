"""PyTorch peers for `bifocal bench`: the same shapes, contexts and batch-1 decode, measured with
Hugging Face transformers, and bifocal's decode tok/s divided by theirs.

Run on the GPU machine, in the same call as `bifocal bench` (so both see the same GPU state):
    python3 tools/bench/peer_pytorch.py --shape qwen3-4b --context 1k,8k,32k --gen 128 --repeat 3 \
        --bifocal-json OUT/bench.json --out OUT/peer

Peers (tools/bench/README.md says more):
  eager          Qwen3ForCausalLM, attn_implementation="sdpa", DynamicCache, a Python loop of
                 forward + argmax per token (what generate() does per step, minus its logits
                 processors and stopping checks).
  eager sliding  the same with every layer a sliding-window layer of W tokens (the matching peer of
                 bifocal's swa:window=W).
  compiled       StaticCache, the decode step torch.compile'd and captured once as a CUDA graph
                 that advances its own position, replayed per token (the gpt-fast pattern); the
                 cache's write position rewound before every repeat; for a window W, StaticCache's
                 sliding layers.

Every row runs in a fresh process (peer_runner.py) with at most --timeout-per-row seconds, so a
device-side assert, a crash or a hung compile costs that row only; peer.md and peer.json are
rewritten after every row. Weights are random bf16 (no downloads); the shapes are bifocal's
builtin ones (peer_shapes.py).

The modules: peer_shapes.py (shapes, row keys), peer_report.py (bench.json matching, peer.md and
peer.json), peer_models.py (models, caches, the eager peer), peer_compiled.py (the compiled
peer), peer_runner.py (a process per row), and this command line. Only peer_models.py and
peer_compiled.py use torch, imported when measuring; the rest runs anywhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import os
import re
import sys
from typing import Iterable, Optional

from peer_compiled import cache_length_text
from peer_models import Settings
from peer_report import (BifocalRow, builtin_name, document, fill_description, load_bifocal_json, match_rows,
                         peer_descriptions, render_markdown, windows_in, write_outputs)
from peer_runner import RowRunner, WorkerUnavailable, plan_rows
from peer_shapes import (COMPILE_MODES, PEERS, REPO_ROOT, context_label, load_shapes, log, parse_contexts,
                         short_error)

DEFAULT_TIMEOUT_PER_ROW = 150.0


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Batch-1 decode tok/s of PyTorch/transformers peers at bifocal bench's shapes and contexts, "
                    "and bifocal/peer ratios.")
    parser.add_argument("--shape", action="append", help="builtin shape (repeatable; default: the shapes of the "
                        "--bifocal-json files, else qwen3-4b)")
    parser.add_argument("--context", help="contexts, e.g. 1k,8k,32k (default: those of the --bifocal-json files, "
                        "else 1k,8k,32k)")
    parser.add_argument("--window", type=int, action="append", default=[],
                        help="sliding window to measure (repeatable); the windows of swa rows in --bifocal-json are added")
    parser.add_argument("--gen", type=int, default=128, help="decode steps timed per repeat")
    parser.add_argument("--repeat", type=int, default=3, help="repeats; the median is reported")
    parser.add_argument("--peer", action="append", choices=PEERS, help="peers to run (repeatable; default: all)")
    parser.add_argument("--compile-mode", choices=COMPILE_MODES, default=COMPILE_MODES[0],
                        help="torch.compile mode of the compiled peer; reduce-overhead uses torch's own CUDA graphs "
                             "instead of one captured here (default: %(default)s)")
    parser.add_argument("--fill", choices=("random", "prefill"), default="random",
                        help="fill the cache with random K/V (as bifocal bench does) or by a chunked prefill of "
                             "random tokens (default: %(default)s)")
    parser.add_argument("--prefill-chunk", type=int, default=4096, help="tokens per forward of --fill prefill")
    parser.add_argument("--timeout-per-row", type=float, default=DEFAULT_TIMEOUT_PER_ROW, metavar="SECONDS",
                        help="wall-clock limit of each row's process: start-up, model, fill, compile and timing; a "
                             "row over it is killed and reported as skipped (default: %(default)g; "
                             "max-autotune compiles of a 4B model need more)")
    parser.add_argument("--bifocal-json", action="append", default=[], help="bifocal bench.json to compare (repeatable)")
    parser.add_argument("--peer-json", help="compare an earlier run's peer.json instead of measuring (no GPU needed)")
    parser.add_argument("--out", help="directory for peer.md and peer.json")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--source-root", default=REPO_ROOT, help="bifocal source tree to read the shapes from")
    return parser


@dataclasses.dataclass
class Plan:
    shapes: list[str]
    contexts: list[int]
    windows: list[int]
    peers: list[str]


def resolve_plan(args: argparse.Namespace, bifocal_rows: list[BifocalRow], known_shapes: Iterable[str]) -> Plan:
    """What to measure: the flags, defaulting to what the bifocal rows need."""
    known_shapes = list(known_shapes)
    if args.shape:
        shapes = list(dict.fromkeys(args.shape))
    else:
        from_json = [s for s in (builtin_name(r.shape, known_shapes) for r in bifocal_rows) if s]
        shapes = list(dict.fromkeys(from_json)) or ["qwen3-4b"]
    unknown = [s for s in shapes if s not in known_shapes]
    if unknown:
        raise ValueError(f"--shape: unknown {', '.join(unknown)} (known: {', '.join(known_shapes)})")
    if args.context:
        contexts = parse_contexts(args.context)
    else:
        contexts = sorted({r.context for r in bifocal_rows}) or parse_contexts("1k,8k,32k")
    if any(w < 1 for w in args.window):
        raise ValueError("--window must be positive")
    windows = sorted(set(args.window) | set(windows_in(bifocal_rows)))
    if args.gen < 1 or args.repeat < 1:
        raise ValueError("--gen and --repeat must be at least 1")
    if args.timeout_per_row <= 0:
        raise ValueError("--timeout-per-row must be positive")
    return Plan(shapes, contexts, windows, list(dict.fromkeys(args.peer or PEERS)))


def command_line(argv: list[str]) -> str:
    def quote(word: str) -> str:
        return word if re.fullmatch(r"[\w@%+=:,./-]+", word) else "'" + word.replace("'", "'\\''") + "'"
    return " ".join(["python3", "tools/bench/peer_pytorch.py", *map(quote, argv)])


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings(gen=args.gen, repeat=args.repeat, compile_mode=args.compile_mode, fill=args.fill,
                    prefill_chunk=args.prefill_chunk, seed=args.seed)


def measure(args: argparse.Namespace, argv: list[str], plan: Plan, shapes: dict, synthetic, shape_source: str,
            bifocal_rows: list[BifocalRow]) -> Optional[tuple[dict, list[dict]]]:
    """(meta, peer rows) measured one process per row; None when this machine cannot measure."""
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"peer_pytorch.py: cannot measure here (no {', '.join(missing)}); --peer-json compares an earlier "
              "run without a GPU", file=sys.stderr)
        return None
    fill = fill_description(args.fill, args.prefill_chunk)
    meta = {"command": command_line(argv),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "shapes": plan.shapes, "contexts": plan.contexts, "windows": plan.windows, "peers": plan.peers,
            "generated_tokens": args.gen, "repeats": args.repeat, "compile_mode": args.compile_mode, "fill": fill,
            "timeout_per_row": args.timeout_per_row, "shape_source": shape_source,
            "peer_descriptions": peer_descriptions(cache_length_text(args.gen)), "seed": args.seed}
    rows = plan_rows(plan.shapes, plan.windows, plan.peers, plan.contexts, fill)
    log(f"shapes {', '.join(plan.shapes)}; contexts {', '.join(map(context_label, plan.contexts))}; windows "
        f"{', '.join(map(str, plan.windows)) or 'none'}; peers {', '.join(plan.peers)}: {len(rows)} rows, each in "
        f"its own process of at most {args.timeout_per_row:g} s")

    def on_row(done: list[dict], row_meta: Optional[dict]) -> None:
        if row_meta and "device" not in meta:
            meta.update(row_meta)
            log(f"{meta['device']}: torch {meta['torch']} (CUDA {meta['cuda']}), transformers "
                f"{meta['transformers']}, triton {meta['triton']}")
        if args.out:
            so_far = match_rows(bifocal_rows, done, shapes)
            write_outputs(args.out, render_markdown(meta, done, so_far),
                          document(meta, done, so_far, args.bifocal_json, partial=len(done) < len(rows)))

    runner = RowRunner(settings_from(args), shapes, synthetic, args.timeout_per_row)
    try:
        return meta, runner.run(rows, on_row)
    except WorkerUnavailable as error:
        print(f"peer_pytorch.py: cannot measure here ({error}); --peer-json compares an earlier run without a GPU",
              file=sys.stderr)
        return None


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_arg_parser().parse_args(argv)
    shapes, synthetic, shape_source = load_shapes(args.source_root)
    bifocal_rows: list[BifocalRow] = []
    for path in args.bifocal_json:
        try:
            bifocal_rows += load_bifocal_json(path)
        except (OSError, ValueError, KeyError) as error:
            log(f"{path}: not read ({short_error(error)}); no comparison from it")
    try:
        plan = resolve_plan(args, bifocal_rows, shapes)
    except ValueError as error:
        print(f"peer_pytorch.py: {error}", file=sys.stderr)
        return 2

    if args.peer_json:
        with open(args.peer_json, encoding="utf-8") as f:
            previous = json.load(f)
        meta, peer_rows = previous["meta"], previous["peer_rows"]
    else:
        measured = measure(args, argv, plan, shapes, synthetic, shape_source, bifocal_rows)
        if measured is None:
            return 1
        meta, peer_rows = measured
    comparisons = match_rows(bifocal_rows, peer_rows, shapes)
    for row in bifocal_rows:
        if row.generated_tokens and row.generated_tokens != meta.get("generated_tokens"):
            log(f"{row.source}: bifocal timed {row.generated_tokens} steps, the peers {meta.get('generated_tokens')}")
            break
    markdown = render_markdown(meta, peer_rows, comparisons)
    sys.stdout.write(markdown)
    if args.out:
        write_outputs(args.out, markdown, document(meta, peer_rows, comparisons, args.bifocal_json, partial=False))
        log(f"wrote {os.path.join(args.out, 'peer.md')} and peer.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
