"""A prefill's layers kernel by kernel, as the GPU ran them, from kernel_timeline.cpp's CSV
(tools/cuda/kernel_timeline.sh MIXER SHAPE OUT TOKENS prefill).

    python3 tools/cuda/prefill_timeline.py timeline.csv > prefill.md

The decode step has kernel_timeline.py; this is its companion for prefill, which runs outside CUDA
graphs (graph_node 0). A forward pass starts at embedding_kernel (a prompt longer than the prefill
chunk takes one pass a chunk), and every layer of a prefill launches qk_norm_rope_kernel, so a
layer is taken from one qk_norm_rope's start to the next's: its mixer, o_proj, the MLP, and the next
layer's q, k and v products. The pass's last layer runs into the final norm and the LM head, so it
is left out of the medians. Kernels that fill synthetic weights or caches (fill_*) are left out.

The report is for the run's last pass (the last chunk of the last timed prefill): the median layer
span, then the middle layer kernel by kernel in µs from its qk_norm_rope's start, with what each
kernel adds to the layer (kernel_timeline.py's frontier walk: the part of its end past every
earlier kernel's end; the additions sum to the layer's span up to its last kernel's end), then
every kernel's median start, end and duration over the full layers (a kernel is its name and its
place among the layer's kernels of that name; one layer alone moves by a few µs). Trace one
mixer a run: the last pass is the last mixer's.
"""
import statistics

from kernel_timeline import frontier_walk, read_records, report_main

PASS_KERNEL = "embedding_kernel"
LAYER_KERNEL = "qk_norm_rope_kernel"
FILL_PREFIX = "fill_"


def split_passes(records):
    """The prefill kernels (graph_node 0, no fill_*) by start time, cut before each PASS_KERNEL; only
    passes with at least two layers (a decode step outside a graph, if any, has none)."""
    kernels = sorted((r for r in records if r["node"] == 0 and not r["name"].startswith(FILL_PREFIX)),
                     key=lambda r: r["start"])
    passes, current = [], []
    for record in kernels:
        if record["name"].startswith(PASS_KERNEL) and current:
            passes.append(current)
            current = []
        current.append(record)
    passes.append(current)
    return [p for p in passes if sum(r["name"].startswith(LAYER_KERNEL) for r in p) >= 2]


def split_layers(kernels):
    """The pass's kernels from each LAYER_KERNEL to the next (the last one to the pass's end)."""
    starts = [i for i, r in enumerate(kernels) if r["name"].startswith(LAYER_KERNEL)]
    return [kernels[a:b] for a, b in zip(starts, starts[1:] + [len(kernels)])]


def summarise(records):
    passes = split_passes(records)
    if not passes:
        raise ValueError(f"no prefill pass ({PASS_KERNEL}, then {LAYER_KERNEL} a layer) outside graphs: "
                         "was the run traced with a prefill (bench --context N, not --max-prefill 0)?")
    layers = split_layers(passes[-1])
    spans = [(b[0]["start"] - a[0]["start"]) / 1e3 for a, b in zip(layers, layers[1:])]
    full = layers[:-1]  # the last layer runs into the final norm and the LM head
    middle = full[len(full) // 2]
    begin = middle[0]["start"]
    _, added = frontier_walk(middle)
    lines = [f"Prefill pass {len(passes)} of {len(passes)}: {len(layers)} layers; layer span median "
             f"{statistics.median(spans):.1f} µs (min {min(spans):.1f}, max {max(spans):.1f}; one "
             f"{LAYER_KERNEL} start to the next, the last layer left out)", "",
             pass_breakdown(passes[-1], layers), "",
             f"Layer {len(full) // 2 + 1} of {len(layers)}, µs from its {LAYER_KERNEL} start:", "",
             "| kernel | grid × threads | start | end | lasts | adds |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    for record in middle:
        lines.append(f"| `{record['name']}` | {record['grid']} × {record['threads']} | "
                     f"{(record['start'] - begin) / 1e3:.1f} | {(record['end'] - begin) / 1e3:.1f} | "
                     f"{(record['end'] - record['start']) / 1e3:.1f} | {added[id(record)] / 1e3:.1f} |")
    lines += ["", f"Each kernel's median over the {len(full)} full layers, µs from its layer's {LAYER_KERNEL} start:", "",
              "| kernel | grid | start | end | lasts |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += kernel_medians(full)
    return "\n".join(lines) + "\n"


def pass_breakdown(kernels, layers):
    """One line: the pass's span, first kernel's start to last kernel's end, in three parts: before the
    first layer, the full layers, and the last layer with what follows it (the final norm, the LM
    head, the sampling). Two mixers' passes compare part by part: stop 64 found Bifocal's share of
    swa's 1K prefill the same over the pass as over the layers."""
    begin, end = kernels[0]["start"], max(r["end"] for r in kernels)
    first, last = layers[0][0]["start"], layers[-1][0]["start"]
    return (f"The pass: {(end - begin) / 1e3:.1f} µs from its first kernel's start to its last one's end: "
            f"{(first - begin) / 1e3:.1f} before the first layer's {LAYER_KERNEL}, {(last - first) / 1e3:.1f} "
            f"from there to the last layer's ({len(layers) - 1} layers), {(end - last) / 1e3:.1f} in the last "
            f"layer and after it (the final norm, the LM head, the sampling).")


def kernel_medians(layers):
    """Table rows: each kernel (name, and which of the layer's kernels of that name) in the order of
    its median start, with its median start, end and duration; kernels in under half the layers
    are left out."""
    times = {}  # (name, place) → [(start, end, grid)], µs from the layer's start
    for layer in layers:
        begin, seen = layer[0]["start"], {}
        for record in layer:
            place = seen.get(record["name"], 0)
            seen[record["name"]] = place + 1
            times.setdefault((record["name"], place), []).append(
                ((record["start"] - begin) / 1e3, (record["end"] - begin) / 1e3, record["grid"]))
    rows = []
    for (name, place), spans in times.items():
        if 2 * len(spans) < len(layers):
            continue
        start = statistics.median(a for a, _, _ in spans)
        end = statistics.median(b for _, b, _ in spans)
        lasts = statistics.median(b - a for a, b, _ in spans)
        label = f"`{name}`" + (f" (#{place + 1})" if place else "")
        rows.append((start, f"| {label} | {spans[0][2]} | {start:.1f} | {end:.1f} | {lasts:.1f} |"))
    return [row for _, row in sorted(rows, key=lambda item: item[0])]


if __name__ == "__main__":
    report_main(summarise, "prefill_timeline.py")
