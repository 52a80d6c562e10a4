"""The decode window attention's phases in place, from a build with -DBIFOCAL_WINDOW_ATTENTION_PHASES=1
(src/backend/cuda/window_phase_stamps.cuh): every block of one launch prints its eight %globaltimer
stamps, and this table says how long each phase took over the blocks and when the blocks got there.

    $BUILD/bifocal bench --shape qwen3-4b --mixer swa:window=576,sink=learned --context 1k --max-prefill 0 \\
        --gen 16 --repeat 1 2>&1 | python3 tools/cuda/window_phases.py

A phase's row: its length in each block (median, max over the blocks) and, on the launch's clock
(0 = the first block's return from its wait for q+k+v), when the first and the last block finished
it. The last row's "last block" is the launch's end as its successor (o_proj) sees it. Last, the
blocks that returned from the wait late — they reached it late — and how long they took from their
start to the wait's return; and, from the SM cycles each block counted between its first and last
stamp (the line's last field, since stop 32), the clock its multiprocessor ran at in place.
"""
import statistics
import sys

PHASES = ["start", "wait returned", "q normed and rotated", "first rows landed", "rounds done",
          "cluster merge begins", "outputs written", "end"]
PREFIX = "window-phases "
TIMER_TICK_NS = 256  # %globaltimer's step on the H200 (docs/notes/cuda-stop26-2026-12-03.md)


def read_stamps(lines):
    """{block: [8 stamps in ns] (+ [SM cycles from the first to the last] when printed)} from the
    lines the kernel printed (other lines ignored)."""
    blocks = {}
    for line in lines:
        if not line.startswith(PREFIX):
            continue
        fields = line[len(PREFIX):].split()
        if len(fields) not in (1 + len(PHASES), 2 + len(PHASES)):  # before stop 32 without the cycles
            raise ValueError(f"a window-phases line with {len(fields)} fields, not {1 + len(PHASES)} "
                             f"or {2 + len(PHASES)}: {line.strip()}")
        block, *stamps = (int(f) for f in fields)
        if block in blocks:
            raise ValueError(f"block {block} printed twice: more than one launch recorded?")
        blocks[block] = stamps
    if not blocks:
        raise ValueError("no window-phases lines: was the build made with -DBIFOCAL_WINDOW_ATTENTION_PHASES=1, "
                         "and did the run reach the recorded launch (window_phase_stamps.cuh's kRecordedLaunch)?")
    return blocks


def summarise(blocks):
    origin = min(stamps[1] for stamps in blocks.values())  # the first return from the wait
    lines = [f"{len(blocks)} blocks; µs, 0 = the first block's return from its wait for the previous kernel", "",
             "| phase (ends at) | lasts: median | max | first block done at | last block done at |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for phase in range(1, len(PHASES)):
        lengths = [(s[phase] - s[phase - 1]) / 1e3 for s in blocks.values()]
        done = [(s[phase] - origin) / 1e3 for s in blocks.values()]
        lines.append(f"| {PHASES[phase]} | {statistics.median(lengths):.2f} | {max(lengths):.2f} | "
                     f"{min(done):.2f} | {max(done):.2f} |")
    started = [(s[0] - origin) / 1e3 for s in blocks.values()]
    lines += ["", f"Blocks started from {min(started):.2f} to {max(started):.2f} µs on that clock "
              "(negative: before the first wait returned, as dependent launches do)."]
    # The wait returns when the previous kernel has completed: at once in every block that reached
    # it. A block returning later reached it late, and holds its cluster's barriers as long (stop 31:
    # the blocks that start only as q+k+v's blocks leave their multiprocessors).
    late = [s for s in blocks.values() if s[1] - origin > TIMER_TICK_NS]
    if late:
        returned = max(s[1] - origin for s in late) / 1e3
        first_start, last_start = (f(s[0] - origin for s in late) / 1e3 for f in (min, max))
        to_wait = [(s[1] - s[0]) / 1e3 for s in late]
        lines.append(f"{len(late)} of {len(blocks)} blocks returned from the wait more than one timer tick "
                     f"after the first (up to {returned:.2f} µs); they started from {first_start:.2f} to "
                     f"{last_start:.2f} µs and took {statistics.median(to_wait):.2f} µs (median; max "
                     f"{max(to_wait):.2f}) from their start to the wait's return.")
    # SM cycles over the block's nanoseconds from its first stamp to its last: the clock in place.
    clocks = [s[len(PHASES)] / (s[len(PHASES) - 1] - s[0]) * 1e3 for s in blocks.values()
              if len(s) > len(PHASES) and s[len(PHASES) - 1] > s[0]]
    if clocks:
        lines.append(f"SM clock over the blocks' lifetimes: median {statistics.median(clocks):.0f} MHz "
                     f"(min {min(clocks):.0f}, max {max(clocks):.0f}).")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) > 2:
        sys.exit("usage: window_phases.py [LOG]  (the run's output; standard input without LOG)")
    name = sys.argv[1] if len(sys.argv) == 2 else "standard input"
    try:
        if len(sys.argv) == 2:
            with open(sys.argv[1], encoding="utf-8", errors="replace") as source:
                blocks = read_stamps(source)
        else:
            blocks = read_stamps(sys.stdin)
        print(summarise(blocks), end="")
    except (OSError, ValueError) as error:  # named by its source, as kernel_timeline.py names its CSV
        sys.exit(f"window_phases.py: {name}: {error}")


if __name__ == "__main__":
    main()
