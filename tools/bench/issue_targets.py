#!/usr/bin/env python3
"""Issue 5's benchmark targets, checked against `bifocal bench` JSON files.

    python3 tools/bench/issue_targets.py docs/performance/qwen3-4b.json docs/performance/qwen3.5.json \
        docs/performance/qwen3-4b-full.json docs/performance/paper-fig2.json [--out DIR]

Each target (targets() below, in the issue's words) is checked on every file that holds the rows it
needs: its shape (the JSON's `model`), its mixers (a row's spec holds every key=value the target's
spec names: `bifocal:window=448,state=kv` matches the bench's `bifocal:window=448,sink=learned,state=kv`)
and its contexts. Prints a Markdown table, one line per target and file: what was measured, and
`met`, `not met` or `incomplete` (a context the target names is missing). The issue sets its
targets on the H200: a file from another card says so beside its status, since a ratio to the
bandwidth roofline moves with the card (an H100's lower bandwidth hides fixed latencies).
A target no file holds rows for is listed as `not measured`. --out DIR also writes targets.md and
targets.json. Not checked here: the 32K prefill's share of the bf16 matmul peak (the bench does not
measure the peak; docs/performance.md has the arithmetic).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_report import parse_mixer  # noqa: E402  (plain Python, as this file)
from peer_shapes import context_label  # noqa: E402

K = 1024
ROW_KEYS = ("mixer", "context", "decode_tokens_per_second", "prefill_tokens_per_second", "roofline_ratio",
            "cache_bytes", "accounted_cache_bytes", "peak_device_bytes")
FIRST, LAST = 1 * K, 256 * K  # "at every context from 1K to 256K"


# Comparisons at a target's line forgive the last bits of a float quotient (420 / 400 − 1 is
# 0.05000000000000004): a measurement exactly on the line meets it.
SLACK = 1e-12


def at_least(value: float, line: float) -> bool:
    return value >= line - SLACK


def at_most(value: float, line: float) -> bool:
    return value <= line + SLACK


def spec_matches(row_spec: str, wanted: str) -> bool:
    """The row's mixer is the wanted one: its kind, and every key=value the wanted spec names."""
    row, target = parse_mixer(row_spec), parse_mixer(wanted)
    options = dict(row.options)
    return row.kind == target.kind and all(options.get(k) == v for k, v in target.options)


@dataclass
class Bench:
    """One bench JSON: its shape, card, date and rows."""
    path: str
    model: str
    device: str
    date: str
    rows: list[dict]

    @staticmethod
    def load(path: str) -> "Bench | None":
        """The file's rows; None (with a warning) for JSON that is not a bench's, such as peer.json."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as error:
            raise SystemExit(f"issue_targets: {path}: {error}")
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list) or "model" not in data:
            print(f"issue_targets: {path}: skipped, not a bifocal bench JSON (no 'model' and 'rows')", file=sys.stderr)
            return None
        for i, row in enumerate(data["rows"]):
            missing = [k for k in ROW_KEYS if k not in row]
            if missing:
                raise SystemExit(f"issue_targets: {path}: row {i} lacks {', '.join(missing)}")
        return Bench(path, data["model"], data.get("device", "?"), data.get("date", "?"), data["rows"])

    def rows_of(self, spec: str) -> dict[int, dict]:
        """The rows of the mixer `spec`, by context."""
        return {row["context"]: row for row in self.rows if spec_matches(row["mixer"], spec)}


@dataclass
class Verdict:
    status: str  # met, not met, incomplete
    measured: str


# A check: the mixer specs whose rows it reads (a file without them is not checked), and the check.
Check = tuple[list[str], Callable[[Bench], Verdict]]


@dataclass
class Target:
    name: str
    model: str
    mixers: list[str]
    check: Callable[[Bench], Verdict]
    results: list[tuple[Bench, Verdict]] = field(default_factory=list)

    @staticmethod
    def of(name: str, model: str, check: Check) -> "Target":
        return Target(name, model, *check)


def verdict(ok: bool, measured: str, missing: list[int] | None = None) -> Verdict:
    if missing:
        return Verdict("incomplete", measured + "; missing " + ", ".join(map(context_label, missing)))
    return Verdict("met" if ok else "not met", measured)


def in_span(rows: dict[int, dict]) -> dict[int, dict]:
    return {c: r for c, r in sorted(rows.items()) if FIRST <= c <= LAST}


def span_missing(rows: dict[int, dict]) -> list[int]:
    return [c for c in (FIRST, LAST) if c not in rows]


def roofline_at_every_context(spec: str, least: float) -> Check:
    def check(bench: Bench) -> Verdict:
        rows = in_span(bench.rows_of(spec))
        ratios = [r["roofline_ratio"] for r in rows.values()]
        measured = f"{spec}: " + ", ".join(f"{context_label(c)} {r['roofline_ratio']:.3f}" for c, r in rows.items())
        return verdict(all(at_least(x, least) for x in ratios), measured, span_missing(rows))
    return [spec], check


def decode_speeds(bench: Bench, specs: list[str]) -> tuple[dict[str, list[float]], list[int]]:
    """Each spec's decode tok/s over 1K–256K, and the span's ends that any of them lacks."""
    speeds, missing = {}, set()
    for spec in specs:
        rows = in_span(bench.rows_of(spec))
        missing.update(span_missing(rows))
        speeds[spec] = [r["decode_tokens_per_second"] for r in rows.values()]
    return speeds, sorted(missing)


def decode_spread(specs: list[str], most: float) -> Check:
    def check(bench: Bench) -> Verdict:
        speeds, missing = decode_speeds(bench, specs)
        spreads = {spec: max(v) / min(v) - 1 if v else 0.0 for spec, v in speeds.items()}
        measured = "; ".join(f"{spec}: {100 * spread:.1f}%" for spec, spread in spreads.items())
        return verdict(all(at_most(spread, most) for spread in spreads.values()), measured, missing)
    return specs, check


def share_of_swa(bifocal: str, swa: str, metric: str, least: float) -> Check:
    """bifocal's metric over swa's at each context both have it: ≥ least at every one."""
    def check(bench: Bench) -> Verdict:
        mine, theirs = bench.rows_of(bifocal), bench.rows_of(swa)
        shares = {c: mine[c][metric] / theirs[c][metric] for c in sorted(set(mine) & set(theirs))
                  if mine[c].get(metric) and theirs[c].get(metric)}
        measured = f"{bifocal} / {swa}: " + ", ".join(f"{context_label(c)} {100 * s:.1f}%" for c, s in shares.items())
        if not shares:
            return Verdict("incomplete", f"no context with both mixers' {metric}")
        return verdict(all(at_least(s, least) for s in shares.values()), measured)
    return [swa, bifocal], check


def roofline_at(spec: str, context: int, least: float) -> Check:
    def check(bench: Bench) -> Verdict:
        row = bench.rows_of(spec).get(context)
        if row is None:
            return Verdict("incomplete", f"{spec}: no {context_label(context)} row")
        measured = f"{spec} at {context_label(context)}: {row['roofline_ratio']:.3f}"
        return verdict(at_least(row["roofline_ratio"], least), measured)
    return [spec], check


def decode_speed_at_every_context(specs: list[str], least: float) -> Check:
    def check(bench: Bench) -> Verdict:
        speeds, missing = decode_speeds(bench, specs)
        ok = all(at_least(speed, least) for values in speeds.values() for speed in values)
        measured = "; ".join(f"{spec}: {min(v):,.0f}–{max(v):,.0f} tok/s" if v else f"{spec}: none"
                             for spec, v in speeds.items())
        mixers = {row["mixer"] for row in bench.rows}
        return verdict(ok, measured + f" ({len(mixers)} mixers in the file)", missing)
    return specs, check


def peak_memory_flat(spec: str) -> Check:
    """Peak device memory at the longest context equals the shortest's; cache measured = accounting."""
    def check(bench: Bench) -> Verdict:
        rows = bench.rows_of(spec)
        if len(rows) < 2:
            return Verdict("incomplete", f"{spec}: fewer than two contexts")
        first, last = rows[min(rows)], rows[max(rows)]
        accounted = all(r["cache_bytes"] == r["accounted_cache_bytes"] for r in rows.values())
        gib = 1 << 30
        measured = (f"{spec}: {first['peak_device_bytes'] / gib:.2f} GiB at {context_label(min(rows))}, "
                    f"{last['peak_device_bytes'] / gib:.2f} GiB at {context_label(max(rows))}; cache "
                    + ("= accounting" if accounted else "≠ accounting"))
        ok = first["peak_device_bytes"] == last["peak_device_bytes"] and accounted
        return verdict(ok, measured, [] if max(rows) >= LAST else [LAST])
    return [spec], check


SWA = "swa:window=576,sink=learned"
BIFOCAL_QWEN3 = "bifocal:window=448,state=kv"
BIFOCAL_QWEN35 = "bifocal:window=320,state=kv"


def targets() -> list[Target]:
    return [
        Target.of("qwen3-4b swa decode ≥ 85% of the roofline, 1K–256K", "qwen3-4b",
                  roofline_at_every_context(SWA, 0.85)),
        Target.of("qwen3-4b Bifocal decode ≥ 85% of the roofline, 1K–256K", "qwen3-4b",
                  roofline_at_every_context(BIFOCAL_QWEN3, 0.85)),
        Target.of("qwen3-4b decode spread 1K–256K ≤ 5%", "qwen3-4b", decode_spread([SWA, BIFOCAL_QWEN3], 0.05)),
        Target.of("Bifocal decode within 3% of swa (qwen3-4b)", "qwen3-4b",
                  share_of_swa(BIFOCAL_QWEN3, SWA, "decode_tokens_per_second", 0.97)),
        Target.of("Bifocal decode within 3% of swa (qwen3.5-4b-like)", "qwen3.5-4b-like",
                  share_of_swa(BIFOCAL_QWEN35, SWA, "decode_tokens_per_second", 0.97)),
        Target.of("Bifocal prefill ≥ 90% of swa's (qwen3-4b)", "qwen3-4b",
                  share_of_swa(BIFOCAL_QWEN3, SWA, "prefill_tokens_per_second", 0.90)),
        Target.of("Bifocal prefill ≥ 90% of swa's (qwen3.5-4b-like)", "qwen3.5-4b-like",
                  share_of_swa(BIFOCAL_QWEN35, SWA, "prefill_tokens_per_second", 0.90)),
        Target.of("full at 128K ≥ 80% of its roofline", "qwen3-4b", roofline_at("full", 128 * K, 0.80)),
        Target.of("qwen3.5-4b-like swa ≥ 85% of the roofline", "qwen3.5-4b-like",
                  roofline_at_every_context(SWA, 0.85)),
        Target.of("qwen3.5-4b-like Bifocal ≥ 85% of the roofline", "qwen3.5-4b-like",
                  roofline_at_every_context(BIFOCAL_QWEN35, 0.85)),
        Target.of("paper-fig2 swa 64 and 512 ≥ 8,000 tok/s to 256K", "paper-fig2",
                  decode_speed_at_every_context(["swa:window=64", "swa:window=512"], 8000)),
        Target.of("qwen3-4b swa peak device memory at 256K = at 1K", "qwen3-4b", peak_memory_flat(SWA)),
        Target.of("qwen3.5-4b-like swa peak device memory at 256K = at 1K", "qwen3.5-4b-like", peak_memory_flat(SWA)),
    ]


def evaluate(benches: list[Bench]) -> list[Target]:
    checked = targets()
    for target in checked:
        for bench in benches:
            if bench.model == target.model and all(bench.rows_of(spec) for spec in target.mixers):
                target.results.append((bench, target.check(bench)))
    return checked


def on_target_card(bench: Bench) -> bool:
    return "H200" in bench.device


def markdown(checked: list[Target]) -> str:
    lines = ["| target | file (card, date) | measured | status |", "| --- | --- | --- | --- |"]
    for target in checked:
        if not target.results:
            lines.append(f"| {target.name} | — | — | not measured |")
        for bench, result in target.results:
            status = (result.status if on_target_card(bench)
                      else f"{result.status} (on {bench.device}; the target is the H200's)")
            lines.append(f"| {target.name} | `{os.path.basename(bench.path)}` ({bench.device}, {bench.date}) | "
                         f"{result.measured} | {status} |")
    return "\n".join(lines) + "\n"


def as_json(checked: list[Target]) -> list[dict]:
    return [{"target": t.name, "model": t.model,
             "results": [{"file": b.path, "device": b.device, "date": b.date, "on_target_card": on_target_card(b),
                          "status": v.status, "measured": v.measured} for b, v in t.results]} for t in checked]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bench_json", nargs="+", help="bench.json files written by `bifocal bench --out`")
    parser.add_argument("--out", help="a folder for targets.md and targets.json")
    args = parser.parse_args(argv)
    benches = [bench for bench in map(Bench.load, args.bench_json) if bench is not None]
    if not benches:
        raise SystemExit("issue_targets: none of the files is a bifocal bench JSON")
    checked = evaluate(benches)
    table = markdown(checked)
    sys.stdout.write(table)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "targets.md"), "w", encoding="utf-8") as f:
            f.write(table)
        with open(os.path.join(args.out, "targets.json"), "w", encoding="utf-8") as f:
            json.dump(as_json(checked), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
