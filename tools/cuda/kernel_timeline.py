"""The decode step's time kernel by kernel, as the GPU ran it, from kernel_timeline.cpp's CSV
(tools/cuda/kernel_timeline.sh).

    python3 tools/cuda/kernel_timeline.py timeline.csv > timeline.md

Unlike kernel_times.py (Nsight Compute, kernels serialised), the records keep the overlap that
programmatic dependent launch gives, so the step's time can be split exactly: walking a step's
kernels in the order they started, each one *adds* to the step the part of its end that lies past
every earlier kernel's end (the frontier); the additions sum to the step's span, from its first
kernel's start to its last kernel's end. A kernel launched early that waits (a product streaming
its weights before the previous kernel's output is there) shows a long duration and a small
addition; a kernel nothing overlaps adds its whole duration.

A step is the kernels of one graph launch, cut after advance_decode_step_kernel (the last kernel
of every step). Inside a step the kernels are keyed by their place in the graph (graph node ids
follow the capture order), and the run of places whose names repeat with one period is taken as
the layers: the table has one row for each place in a layer (summed over the layers) and one for
each kernel outside them (embedding, LM head, argmax, …), then the middle layer of the middle step
kernel by kernel (start, end, what it adds). Values are medians over the steps; a run
of several mixers gets one table a decode graph. Runs with --ablate are refused (their reference
steps end in an emptied kernel, not in advance_decode_step_kernel).
"""
import csv
import re
import statistics
import sys
from collections import Counter, defaultdict

from kernel_times import short_name

STEP_KERNEL = "advance_decode_step_kernel"
EMPTIED_KERNEL = "emptied_kernel"  # graph_ablation.cu's stand-in
# bifocal's own namespaces, left out of template arguments too (the labels stay readable)
NAMESPACES = re.compile(r"bifocal::cuda::(\(anonymous namespace\)::)?")


def read_records(lines):
    """Rows of the CSV as dicts with integer times (ns) and the short kernel name."""
    reader = csv.DictReader(lines)
    needed = {"start_ns", "end_ns", "graph_node", "grid_blocks", "block_threads", "name"}
    if reader.fieldnames is None or not needed <= set(reader.fieldnames):
        raise ValueError(f"not a kernel_timeline CSV: its header needs {sorted(needed)}")
    records = []
    for row in reader:
        records.append({"start": int(row["start_ns"]), "end": int(row["end_ns"]), "node": int(row["graph_node"]),
                        "grid": int(row["grid_blocks"]), "threads": int(row["block_threads"]),
                        "name": NAMESPACES.sub("", short_name(row["name"]))})
    return records


def split_steps(records):
    """The graph launches' kernels (graph_node ≠ 0) by start time, cut after each STEP_KERNEL."""
    steps, current = [], []
    for record in sorted((r for r in records if r["node"] != 0), key=lambda r: r["start"]):
        current.append(record)
        if record["name"].startswith(STEP_KERNEL):
            steps.append(current)
            current = []
    return steps


def frontier_walk(step):
    """Per kernel, walking the step in start order: the frontier (the latest end of the kernels that
    started before it) when it starts, and how far its end moves that frontier — both in ns."""
    ordered = sorted(step, key=lambda r: r["start"])
    frontier = ordered[0]["start"]
    before, added = {}, {}
    for record in ordered:
        before[id(record)] = frontier
        added[id(record)] = max(0, record["end"] - frontier)
        frontier = max(frontier, record["end"])
    return before, added


def layer_period(names):
    """(first, period, repeats): the longest run of names that repeats with one period (the layers)."""
    best, covered = (0, len(names), 1), 0  # no repeating run: the whole step, once
    for period in range(1, len(names) // 2 + 1):
        for first in range(0, min(period, len(names) - 2 * period + 1)):
            repeats = 1
            while (first + (repeats + 1) * period <= len(names) and
                   names[first + repeats * period:first + (repeats + 1) * period] == names[first:first + period]):
                repeats += 1
            if repeats >= 2 and repeats * period > covered:
                best, covered = (first, period, repeats), repeats * period
    return best


def place_labels(names):
    """A label per kernel of a step: 'layer kernel i: name' (its place i in a layer) for the repeating
    run, the name elsewhere; and how many layers the run has (0: none found)."""
    first, period, repeats = layer_period(names)
    labels = []
    for i, name in enumerate(names):
        if repeats >= 2 and first <= i < first + period * repeats:
            labels.append(f"layer kernel {(i - first) % period + 1}: {name}")
        else:
            labels.append(name)
    return labels, (repeats if repeats >= 2 else 0)


def summarise(records):
    if any(r["name"].startswith(EMPTIED_KERNEL) for r in records):
        raise ValueError("a run with --ablate (its graphs have emptied kernels, and steps that do not end in "
                         f"{STEP_KERNEL}): trace a run without --ablate")
    steps = split_steps(records)
    if not steps:
        raise ValueError(f"no {STEP_KERNEL} among the graph kernels: not a decode run (or not traced)")

    def kernel_list(step):
        return tuple(r["name"] for r in sorted(step, key=lambda r: r["node"]))

    # One table a decode graph (one a mixer, when bench ran several), in the order they ran.
    graphs = list(dict.fromkeys(kernel_list(step) for step in steps))
    return "\n".join(summarise_graph([step for step in steps if kernel_list(step) == names], names)
                     for names in graphs)


def summarise_graph(steps, names):
    """The table of one decode graph's steps (all of the same kernel list `names`)."""
    labels, layers = place_labels(list(names))
    order = list(dict.fromkeys(labels))
    per_step_added = defaultdict(list)
    per_step_duration = defaultdict(list)
    per_step_early = defaultdict(list)
    launches = Counter(labels)
    geometry = {}
    spans, gaps = [], []
    previous_end = None  # the previous step of this graph (another mixer's steps run in a block of their own)
    for step in steps:
        by_node = sorted(step, key=lambda r: r["node"])
        frontier_before, added = frontier_walk(step)
        first_start = min(r["start"] for r in step)
        totals, durations, early = defaultdict(float), defaultdict(list), defaultdict(list)
        for label, record in zip(labels, by_node):
            totals[label] += added[id(record)] / 1e3
            durations[label].append((record["end"] - record["start"]) / 1e3)
            early[label].append((frontier_before[id(record)] - record["start"]) / 1e3)
            geometry[label] = (record["grid"], record["threads"])
        for label in order:
            per_step_added[label].append(totals[label])
            per_step_duration[label].append(statistics.median(durations[label]))
            per_step_early[label].append(statistics.median(early[label]))
        spans.append((max(r["end"] for r in step) - first_start) / 1e3)
        if previous_end is not None:
            gaps.append((first_start - previous_end) / 1e3)
        previous_end = max(r["end"] for r in step)
    span = statistics.median(spans)
    lines = [f"{len(steps)} decode steps of {len(names)} kernels ({layers} layers found); step span median "
             f"{span:.1f} µs (first kernel's start to last kernel's end); between steps "
             f"{statistics.median(gaps) if gaps else 0.0:.1f} µs", "",
             "| kernel (by place in the step) | grid × threads | launches a step | µs a launch | "
             "started before the frontier, µs | adds to the step, µs | share |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for label in order:
        added = statistics.median(per_step_added[label])
        grid, threads = geometry[label]
        lines.append(f"| `{label}` | {grid} × {threads} | {launches[label]} | "
                     f"{statistics.median(per_step_duration[label]):.2f} | {statistics.median(per_step_early[label]):.2f} | "
                     f"{added:.1f} | {100 * added / span:.1f}% |")
    lines += middle_layer(steps, len(steps) // 2, names)
    return "\n".join(lines) + "\n"


def middle_layer(steps, index, names):
    """The middle layer of step `index` kernel by kernel, in µs from the step's first start: when each
    kernel ran against its neighbours (what the medians above cannot show)."""
    first, period, repeats = layer_period(list(names))
    if repeats < 2:
        return []
    layer, step = repeats // 2, steps[index]
    by_node = sorted(step, key=lambda r: r["node"])
    begin = min(r["start"] for r in step)
    _, added = frontier_walk(step)
    lines = ["", f"Layer {layer + 1} of {repeats} in step {index + 1} of {len(steps)}, µs from the step's first start:", "",
             "| kernel | start | end | lasts | adds |", "| --- | ---: | ---: | ---: | ---: |"]
    for record in by_node[first + layer * period:first + (layer + 1) * period]:
        lines.append(f"| `{record['name']}` | {(record['start'] - begin) / 1e3:.2f} | {(record['end'] - begin) / 1e3:.2f} | "
                     f"{(record['end'] - record['start']) / 1e3:.2f} | {added[id(record)] / 1e3:.2f} |")
    return lines


def report_main(report, program):
    """The command line of a timeline report (this one, prefill_timeline.py): one CSV argument, the
    report of its records on stdout, any error as a message naming the file."""
    if len(sys.argv) != 2:
        sys.exit(f"usage: {program} TIMELINE.csv")
    try:
        with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
            print(report(read_records(f)), end="")
    except (OSError, ValueError) as error:  # a missing or unreadable file too: a message, not a traceback
        sys.exit(f"{sys.argv[1]}: {error}")


if __name__ == "__main__":
    report_main(summarise, "kernel_timeline.py")
