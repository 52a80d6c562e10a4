"""Summarise Nsight Compute's source page (`ncu -i R --page source --csv --print-source cuda,sass`):
per CUDA source line, its share of the kernel's warp-stall samples and executed instructions,
the lines with the most samples first. Usage: python3 kernel_lines.py lines.csv [count]"""
import csv
import sys


def line_totals(rows):
    """{(file, line): (stall samples, instructions executed, source)} from the source page's
    per-line rows (those without a SASS address); files start with a "File Path" row."""
    totals, current_file, columns = {}, None, None
    for row in rows:
        if not row:
            continue
        if row[0] == "File Path":
            current_file = row[1].rsplit("/", 1)[-1]
        elif row[0] == "Line No":
            columns = (row.index("Address"), row.index("Warp Stall Sampling (All Samples)"),
                       row.index("Instructions Executed"))
        elif columns is not None and row[0].isdigit() and row[columns[0]] == "-":
            samples, instructions = (int(row[c].replace(",", "")) for c in columns[1:])
            key = (current_file, int(row[0]))
            previous = totals.get(key, (0, 0, ""))  # a line inlined into two functions: both count
            totals[key] = (previous[0] + samples, previous[1] + instructions, row[1].strip())
    return totals


def main():
    path = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(path, newline="") as f:
        totals = line_totals(csv.reader(f))
    if not totals:
        sys.exit(f"{path}: no per-line rows (was the build made with -lineinfo?)")
    all_samples = sum(t[0] for t in totals.values()) or 1
    all_instructions = sum(t[1] for t in totals.values()) or 1
    print(f"{all_samples} stall samples, {all_instructions} instructions executed")
    print("| samples | instructions | line | source |\n| ---: | ---: | --- | --- |")
    for (file, line), (samples, instructions, source) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:count]:
        print(f"| {100 * samples / all_samples:.1f}% | {100 * instructions / all_instructions:.1f}% | {file}:{line} | "
              f"`{source[:80]}` |")


if __name__ == "__main__":
    main()
