"""Per-kernel GPU time of bifocal's decode step, or of its prefill, from Nsight Compute's raw CSV
(kernel_times.sh).

    python3 tools/cuda/kernel_times.py ncu.csv > kernel_times.md
    python3 tools/cuda/kernel_times.py --prefill-tokens N ncu.csv > kernel_times.md

--prefill-tokens N: the run prefilled N prompt tokens in all (bench's warm-up prefill and its timed
one together); the table is per 1,000 prompt tokens, over every kernel of the run but the
synthetic fill — the run's two decode steps included, a few hundred µs against the prefills'.

ncu serialises the kernels it measures, so a kernel's time here excludes the overlap that
programmatic dependent launch gives in a real run: the sum is an upper bound of the step, and the
table says where the step's time goes rather than what it is. Kernels of the synthetic context
(fill_*) are left out; the decode steps are counted by advance_decode_step_kernel (one per step).
"""
import csv
import re
import sys
from collections import defaultdict

UNIT_MICROSECONDS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6}
STEP_KERNEL = "advance_decode_step_kernel"


def _split_top_level(text, separator):
    """Split on `separator` outside <> and () (C++ template arguments and parameter lists)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if text[i] in "<(":
            depth += 1
        elif text[i] in ">)":
            depth -= 1
        elif depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            start = i + len(separator)
            i = start
            continue
        i += 1
    parts.append(text[start:])
    return parts


def short_name(name):
    """'void bifocal::cuda::(anonymous namespace)::gemv_kernel<float, 4>(const float *, int)' ->
    'gemv_kernel<float, 4>': the unqualified name with its template arguments, no parameters."""
    # ncu writes an anonymous namespace as "<unnamed>::" or, in its raw page, "unnamed>::": either
    # would read as template brackets, so it goes (the name stays unqualified anyway).
    name = re.sub(r"<?unnamed>::", "", name.strip())
    if name.startswith("void "):
        name = name[len("void "):]
    if name.endswith(")"):  # drop the parameter list: the last balanced (...)
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += name[i] == ")"
            depth -= name[i] == "("
            if depth == 0:
                name = name[:i]
                break
    return _split_top_level(name, "::")[-1].strip()


def read_times(lines):
    """(kernel name, microseconds) for every measured kernel of ncu's `--csv --page raw` output."""
    lines = list(lines)
    # The profiled program's own stdout (bench's report) shares the file: the table starts at
    # ncu's header row, the first line that begins with its "ID" column.
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\"): was ncu run with --csv --page raw?")
    rows = list(csv.reader(line for line in lines[start:] if line.strip() and not line.startswith("==")))
    header = rows[0]
    try:
        name_column = header.index("Kernel Name")
        time_column = next(i for i, h in enumerate(header) if h.startswith("gpu__time_duration"))
    except (ValueError, StopIteration):
        raise ValueError("the CSV has no 'Kernel Name' or gpu__time_duration column") from None
    scale = 1e-3  # ncu's default unit for durations is the nanosecond
    times = []
    for row in rows[1:]:
        if len(row) <= max(name_column, time_column):
            continue
        if not row[0].strip().isdigit():  # the units row under the header
            scale = UNIT_MICROSECONDS.get(row[time_column].strip(), scale)
            continue
        times.append((short_name(row[name_column]), float(row[time_column].replace(",", "")) * scale))
    return times


def kernel_totals(times):
    """Per kernel name: the summed microseconds and the launches, the synthetic fill (fill_*) left out."""
    total = defaultdict(float)
    calls = defaultdict(int)
    for name, microseconds in times:
        if name.startswith("fill_"):
            continue
        total[name] += microseconds
        calls[name] += 1
    return total, calls


def summarise(times):
    steps = sum(1 for name, _ in times if name.startswith(STEP_KERNEL))
    if steps == 0:
        raise ValueError(f"no {STEP_KERNEL} among the kernels: not a decode run")
    total, calls = kernel_totals(times)
    step_total = sum(total.values()) / steps
    lines = [f"{steps} decode steps; serialised kernel time per step {step_total:.1f} µs (an upper bound: no launch overlap)",
             "", "| kernel | launches per step | µs per launch | µs per step | share |", "| --- | ---: | ---: | ---: | ---: |"]
    for name in sorted(total, key=total.get, reverse=True):
        per_step = total[name] / steps
        lines.append(f"| `{name}` | {calls[name] / steps:.1f} | {total[name] / calls[name]:.2f} | {per_step:.1f} | "
                     f"{100 * per_step / step_total:.1f}% |")
    return "\n".join(lines) + "\n"


def summarise_prefill(times, prompt_tokens):
    """The kernels' time per 1,000 prompt tokens (every kernel but the synthetic fill)."""
    if prompt_tokens <= 0:
        raise ValueError(f"--prefill-tokens must be positive, got {prompt_tokens}")
    total, calls = kernel_totals(times)
    if not total:
        raise ValueError("no kernel but the synthetic fill in the CSV")
    thousands = prompt_tokens / 1000
    all_kernels = sum(total.values())
    lines = [f"{prompt_tokens} prompt tokens; serialised kernel time {all_kernels / thousands:.1f} µs per 1,000 tokens "
             "(an upper bound: no launch overlap)", "",
             "| kernel | launches | µs per launch | µs per 1,000 tokens | share |", "| --- | ---: | ---: | ---: | ---: |"]
    for name in sorted(total, key=total.get, reverse=True):
        lines.append(f"| `{name}` | {calls[name]} | {total[name] / calls[name]:.2f} | {total[name] / thousands:.1f} | "
                     f"{100 * total[name] / all_kernels:.1f}% |")
    return "\n".join(lines) + "\n"


def main():
    arguments = sys.argv[1:]
    prompt_tokens = None
    if len(arguments) == 3 and arguments[0] == "--prefill-tokens":
        try:
            prompt_tokens = int(arguments[1])
        except ValueError:
            sys.exit(f"--prefill-tokens: not a number: {arguments[1]}")
        arguments = arguments[2:]
    if len(arguments) != 1:
        sys.exit("usage: kernel_times.py [--prefill-tokens N] NCU_RAW.csv")
    with open(arguments[0], encoding="utf-8", errors="replace") as f:
        try:
            times = read_times(f)
            print(summarise(times) if prompt_tokens is None else summarise_prefill(times, prompt_tokens), end="")
        except ValueError as error:
            sys.exit(f"{arguments[0]}: {error}")


if __name__ == "__main__":
    main()
