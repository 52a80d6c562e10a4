"""Two or more builds' `bifocal bench` runs side by side (tools/cuda/ab_bench.sh writes them).

    python3 tools/cuda/ab_summary.py DIR [--metric prefill|decode] > ab.md

DIR holds one folder per run, named BUILD.SHAPE.ROUND (ab_bench.sh's names), each with the
bench.json of one `bifocal bench` call. For every shape, mixer and context the table gives each
build's value in every round, its median over the rounds, its change against the first build
named on ab_bench.sh's command line (the order kept in DIR/builds.txt; alphabetical without it),
and from SPREAD_MIN_ROUNDS rounds on its spread: the interquartile range over the median (a change
smaller than the spreads is within the rounds' noise);
then, per build, the last mixer's median as a share of the first mixer's (Bifocal / swa, the
issue's "prefill ≥ 90% of swa's"). Rounds of different builds alternate in one device call, so
drift of the machine (clocks under the power cap, another tenant) falls on all builds alike.
"""
import argparse
import json
import os
import statistics
import sys

METRICS = {"prefill": "prefill_tokens_per_second", "decode": "decode_tokens_per_second"}
SPREAD_MIN_ROUNDS = 4  # fewer rounds have no quartiles worth the name


def spread(series):
    """The interquartile range over the median, as a percentage (Python's default, exclusive quartiles)."""
    if len(series) < SPREAD_MIN_ROUNDS:
        return ""
    first, median, third = statistics.quantiles(series, n=4)  # the exclusive method's middle one is the median
    return f"{100 * (third - first) / median:.1f}%"


def read_runs(directory):
    """{(build, shape): {round: rows}} from DIR/BUILD.SHAPE.ROUND/bench.json; the builds in order."""
    runs = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name, "bench.json")
        if not os.path.isfile(path):
            continue
        parts = name.split(".")
        if len(parts) != 3 or not parts[2].isdigit():
            raise ValueError(f"{name}: expected a run folder named BUILD.SHAPE.ROUND")
        build, shape, round_number = parts[0], parts[1], int(parts[2])
        with open(path) as f:
            runs.setdefault((build, shape), {})[round_number] = json.load(f)["rows"]
    if not runs:
        raise ValueError(f"{directory}: no BUILD.SHAPE.ROUND/bench.json (did the runs fail? see their logs)")
    builds = sorted({build for build, _ in runs})
    order_file = os.path.join(directory, "builds.txt")
    if os.path.isfile(order_file):
        with open(order_file) as f:
            named = f.read().split()
        builds = [b for b in named if b in builds] + [b for b in builds if b not in named]
    return runs, builds


def values(rows, key):
    """{(mixer, context): value} of the rows that have the metric."""
    return {(r["mixer"], r["context"]): r[key] for r in rows if r.get(key) is not None}


def context_label(tokens):
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else str(tokens)


def summarise(runs, builds, metric="prefill"):
    key = METRICS[metric]
    shapes = sorted({shape for _, shape in runs})
    lines = [f"{metric} tok/s; change against build `{builds[0]}` (median of the rounds); spread: interquartile "
             f"range over the median (from {SPREAD_MIN_ROUNDS} rounds)", ""]
    for shape in shapes:
        per_build = {}  # build -> {(mixer, context): [value per round]}
        for build in builds:
            rounds = runs.get((build, shape), {})
            series = {}
            for number in sorted(rounds):
                for point, value in values(rounds[number], key).items():
                    series.setdefault(point, []).append(value)
            per_build[build] = series
        points = sorted({p for s in per_build.values() for p in s}, key=lambda p: (p[1], mixer_order(per_build, p[0])))
        if not points:
            continue
        lines += [f"### {shape}", "", "| mixer | context | build | rounds | median | change | spread |",
                  "| --- | ---: | --- | --- | ---: | ---: | ---: |"]
        for mixer, context in points:
            base = per_build[builds[0]].get((mixer, context))
            base_median = statistics.median(base) if base else None
            for build in builds:
                series = per_build[build].get((mixer, context))
                if not series:
                    continue
                median = statistics.median(series)
                change = "" if build == builds[0] or not base_median else f"{100 * (median / base_median - 1):+.1f}%"
                rounds_text = " / ".join(f"{v:.0f}" for v in series)
                cells = [mixer, context_label(context), build, rounds_text, f"{median:.0f}", change, spread(series)]
                lines.append("| " + " | ".join(cells) + " |")
        mixers = sorted({m for m, _ in points}, key=lambda m: mixer_order(per_build, m))
        if len(mixers) >= 2:
            first, last = mixers[0], mixers[-1]
            contexts = sorted({c for _, c in points})
            lines += ["", f"`{last}` as a share of `{first}` (medians):", "",
                      "| build | " + " | ".join(context_label(c) for c in contexts) + " |",
                      "| --- |" + " ---: |" * len(contexts)]
            for build in builds:
                cells = []
                for c in contexts:
                    a, b = per_build[build].get((first, c)), per_build[build].get((last, c))
                    cells.append(f"{100 * statistics.median(b) / statistics.median(a):.1f}%" if a and b else "")
                lines.append(f"| {build} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def mixer_order(per_build, mixer):
    """Mixers in the order the bench ran them (its rows' order), for the first build that has them."""
    for series in per_build.values():
        order = list(dict.fromkeys(m for m, _ in series))
        if mixer in order:
            return order.index(mixer)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--metric", choices=sorted(METRICS), default="prefill")
    args = parser.parse_args(argv)
    try:
        runs, builds = read_runs(args.directory)
    except (OSError, ValueError, KeyError) as error:
        print(f"ab_summary: {error}", file=sys.stderr)
        return 1
    print(summarise(runs, builds, args.metric))
    return 0


if __name__ == "__main__":
    sys.exit(main())
