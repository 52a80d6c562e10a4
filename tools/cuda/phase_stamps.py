"""A kernel's phases in place, from a debug build with its phase stamps (src/backend/cuda/phase_stamps.cuh):
every block of one launch prints its eight %globaltimer stamps, and this table says how long each phase
took over the blocks and when the blocks got there. Kernels (--kernel, window by default):

  window        the decode window attention (-DBIFOCAL_WINDOW_ATTENTION_PHASES=1, window_phase_stamps.cuh)
      $BUILD/bifocal bench --shape qwen3-4b --mixer swa:window=576,sink=learned --context 1k --max-prefill 0 \\
          --gen 16 --repeat 1 2>&1 | python3 tools/cuda/phase_stamps.py
  denominators  the mLSTM prefill's kernel 3 (-DBIFOCAL_MLSTM_DENOMINATOR_PHASES=1, mlstm_prefill_denominators.cu)
      $BUILD/bifocal bench --shape qwen3-4b --mixer bifocal:window=448,state=kv --context 1k --gen 8 \\
          --repeat 3 --out /tmp/run 2>&1 | python3 tools/cuda/phase_stamps.py --kernel denominators
  attention     the tensor-core prefill attention with Bifocal's mLSTM outputs in its epilogue
                (-DBIFOCAL_PREFILL_ATTENTION_PHASES=1, attention_prefill_phase_stamps.cuh); the same
                command with --kernel attention. Its clock's 0 is the first block's start; built with
                the denominators' flag too, the log's denominators stamps (the same layer) are placed on it.

A phase's row: its length in each block (median, max over the blocks) and, on the launch's clock
(0 = the first block's return from its wait for the previous kernel; attention: its first start), when the first and the last
block finished it. The last row's "last block" is the launch's end as its successor sees it. Last, the
blocks that returned from the wait late — they reached it late — and how long they took from their
start to the wait's return; and, from the SM cycles each block counted between its first and last
stamp (the line's last field, since stop 32), the clock its multiprocessor ran at in place.
"""
import statistics
import sys

# Per kernel: the line's tag, the eight points' names (the first is the block's start), the build
# flag, and where the recorded launch is chosen. ORIGIN: the point whose first time is the clock's 0.
KERNELS = {
    "window": ("window-phases ",
               ["start", "wait returned", "q normed and rotated", "first rows landed", "rounds done",
                "cluster merge begins", "outputs written", "end"],
               "-DBIFOCAL_WINDOW_ATTENTION_PHASES=1", "window_phase_stamps.cuh's kRecordedLaunch"),
    "denominators": ("denominator-phases ",
                     ["start", "wait returned", "gates and n_c read", "chains stepped, k landed",
                      "weights W and e", "products N and q̂·N", "inverse denominators", "counted done"],
                     "-DBIFOCAL_MLSTM_DENOMINATOR_PHASES=1",
                     "mlstm_prefill_denominators.cu's kRecordedDenominatorLaunch"),
    "attention": ("attention-phases ",
                  ["start", "tiles classified", "key tiles done", "window rows stored", "C_c and the chunk landed",
                   "S made, denominators awaited", "h made, W landed", "outputs added"],
                  "-DBIFOCAL_PREFILL_ATTENTION_PHASES=1",
                  "attention_prefill_phase_stamps.cuh's kRecordedAttentionLaunch"),
}
ORIGIN = {"window": 1, "denominators": 1, "attention": 0}  # attention: it may wait only at its end
TIMER_TICK_NS = 256  # %globaltimer's step on the H200 (docs/notes/cuda-stop26-2026-12-03.md)


def read_stamps(lines, kernel="window"):
    """{block: [8 stamps in ns] (+ [SM cycles from the first to the last] when printed)} from the
    lines the kernel printed (other lines ignored)."""
    prefix, phases, flag, recorded = KERNELS[kernel]
    blocks = {}
    for line in lines:
        if not line.startswith(prefix):
            continue
        fields = line[len(prefix):].split()
        if len(fields) not in (1 + len(phases), 2 + len(phases)):  # before stop 32 without the cycles
            raise ValueError(f"a {prefix.strip()} line with {len(fields)} fields, not {1 + len(phases)} "
                             f"or {2 + len(phases)}: {line.strip()}")
        block, *stamps = (int(f) for f in fields)
        if block in blocks:
            raise ValueError(f"block {block} printed twice: more than one launch recorded?")
        blocks[block] = stamps
    if not blocks:
        raise ValueError(f"no {prefix.strip()} lines: was the build made with {flag}, "
                         f"and did the run reach the recorded launch ({recorded})?")
    return blocks


def summarise(blocks, kernel="window"):
    phases = KERNELS[kernel][1]
    origin = min(stamps[ORIGIN[kernel]] for stamps in blocks.values())
    zero = "the first block's start" if ORIGIN[kernel] == 0 else "the first block's return from its wait for the " \
                                                                 "previous kernel"
    lines = [f"{len(blocks)} blocks; µs, 0 = {zero}", "",
             "| phase (ends at) | lasts: median | max | first block done at | last block done at |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for phase in range(1, len(phases)):
        lengths = [(s[phase] - s[phase - 1]) / 1e3 for s in blocks.values()]
        done = [(s[phase] - origin) / 1e3 for s in blocks.values()]
        lines.append(f"| {phases[phase]} | {statistics.median(lengths):.2f} | {max(lengths):.2f} | "
                     f"{min(done):.2f} | {max(done):.2f} |")
    started = [(s[0] - origin) / 1e3 for s in blocks.values()]
    lines += ["", f"Blocks started from {min(started):.2f} to {max(started):.2f} µs on that clock "
              "(negative: before the first wait returned, as dependent launches do)."]
    # The wait returns when the previous kernel has completed: at once in every block that reached
    # it. A block returning later reached it late, and holds its cluster's barriers as long (stop 31:
    # the blocks that start only as q+k+v's blocks leave their multiprocessors).
    late = [s for s in blocks.values() if s[1] - origin > TIMER_TICK_NS] if ORIGIN[kernel] == 1 else []
    if late:
        returned = max(s[1] - origin for s in late) / 1e3
        first_start, last_start = (f(s[0] - origin for s in late) / 1e3 for f in (min, max))
        to_wait = [(s[1] - s[0]) / 1e3 for s in late]
        lines.append(f"{len(late)} of {len(blocks)} blocks returned from the wait more than one timer tick "
                     f"after the first (up to {returned:.2f} µs); they started from {first_start:.2f} to "
                     f"{last_start:.2f} µs and took {statistics.median(to_wait):.2f} µs (median; max "
                     f"{max(to_wait):.2f}) from their start to the wait's return.")
    # SM cycles over the block's nanoseconds from its first stamp to its last: the clock in place.
    clocks = [s[len(phases)] / (s[len(phases) - 1] - s[0]) * 1e3 for s in blocks.values()
              if len(s) > len(phases) and s[len(phases) - 1] > s[0]]
    if clocks:
        lines.append(f"SM clock over the blocks' lifetimes: median {statistics.median(clocks):.0f} MHz "
                     f"(min {min(clocks):.0f}, max {max(clocks):.0f}).")
    return "\n".join(lines) + "\n"


def denominators_beside(attention_blocks, log_lines):
    """The denominators kernel's stamps of the same layer (a build with both flags records the same
    launch of each) on the attention's clock: whether its epilogues wait for them. Empty without them."""
    try:
        denominators = read_stamps(log_lines, "denominators")
    except ValueError:
        return ""
    # The points by their names in KERNELS, so that a reordered kernel moves them with its labels.
    # Since stop 68 the epilogue awaits them right after S = q̂·Kᵀ, before h: S is in the wait's phase.
    done_at = KERNELS["denominators"][1].index("counted done")
    awaited_at = KERNELS["attention"][1].index("S made, denominators awaited")
    origin = min(stamps[0] for stamps in attention_blocks.values())
    counted = [(s[done_at] - origin) / 1e3 for s in denominators.values()]
    started = [(s[0] - origin) / 1e3 for s in denominators.values()]
    awaited = [(s[awaited_at] - origin) / 1e3 for s in attention_blocks.values()]
    waited = [(s[awaited_at] - s[awaited_at - 1]) / 1e3 for s in attention_blocks.values()]
    held = sum(1 for wait in waited if wait * 1e3 > TIMER_TICK_NS)
    return (f"\nThe denominators kernel beside it ({len(denominators)} blocks, the same layer, this clock): started "
            f"{min(started):.2f} to {max(started):.2f} µs, counted done {min(counted):.2f} to {max(counted):.2f} "
            f"(median {statistics.median(counted):.2f}). The attention's blocks passed their wait for them from "
            f"{min(awaited):.2f} to {max(awaited):.2f} µs, S and the wait taking {statistics.median(waited):.2f} µs "
            f"(median; max {max(waited):.2f}); {held} of {len(attention_blocks)} took more than a timer tick.\n")


def main():
    args = sys.argv[1:]
    kernel = "window"
    if len(args) >= 2 and args[0] == "--kernel":
        kernel, args = args[1], args[2:]
    if kernel not in KERNELS or len(args) > 1 or (args and args[0].startswith("--")):
        sys.exit(f"usage: phase_stamps.py [--kernel {'|'.join(KERNELS)}] [LOG]  "
                 "(the run's output; standard input without LOG)")
    name = args[0] if args else "standard input"
    try:
        if args:
            with open(args[0], encoding="utf-8", errors="replace") as source:
                log_lines = source.readlines()
        else:
            log_lines = sys.stdin.readlines()
        blocks = read_stamps(log_lines, kernel)
        print(summarise(blocks, kernel), end="")
        if kernel == "attention":
            print(denominators_beside(blocks, log_lines), end="")
    except (OSError, ValueError) as error:  # named by its source, as kernel_timeline.py names its CSV
        sys.exit(f"phase_stamps.py: {name}: {error}")


if __name__ == "__main__":
    main()
