"""ab_summary.py on hand-made run folders: medians, changes against the first build, the share of
the first mixer, the builds' order, and the errors for folders it cannot read; and ab_bench.sh's
refusal of arguments that are not NAME=BUNDLE, and its rounds (with a stand-in for the device)."""
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab_summary  # noqa: E402

SWA, BIFOCAL = "swa:window=576,sink=learned", "bifocal:window=448,state=kv"


def row(mixer, context, prefill, decode=400.0):
    return {"mixer": mixer, "context": context, "prefill_tokens_per_second": prefill,
            "decode_tokens_per_second": decode}


class AbSummaryTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.root = self.directory.name

    def tearDown(self):
        self.directory.cleanup()

    def write_run(self, name, rows):
        os.makedirs(os.path.join(self.root, name))
        with open(os.path.join(self.root, name, "bench.json"), "w") as f:
            json.dump({"rows": rows}, f)

    def write_two_builds(self):
        # base: swa 60000 / 62000, Bifocal 51000 / 53000 at 1K -> medians 61000, 52000.
        self.write_run("base.qwen3-4b.1", [row(SWA, 1024, 60000), row(BIFOCAL, 1024, 51000)])
        self.write_run("base.qwen3-4b.2", [row(SWA, 1024, 62000), row(BIFOCAL, 1024, 53000)])
        # new: the same swa, Bifocal 54000 / 56000 -> median 55000: +5.8%.
        self.write_run("new.qwen3-4b.1", [row(SWA, 1024, 60000), row(BIFOCAL, 1024, 54000)])
        self.write_run("new.qwen3-4b.2", [row(SWA, 1024, 62000), row(BIFOCAL, 1024, 56000)])

    def test_medians_changes_and_shares(self):
        self.write_two_builds()
        runs, builds = ab_summary.read_runs(self.root)
        self.assertEqual(builds, ["base", "new"])
        table = ab_summary.summarise(runs, builds)
        self.assertIn(f"| {BIFOCAL} | 1K | base | 51000 / 53000 | 52000 |  |", table)
        self.assertIn(f"| {BIFOCAL} | 1K | new | 54000 / 56000 | 55000 | +5.8% |", table)
        self.assertIn(f"| {SWA} | 1K | new | 60000 / 62000 | 61000 | +0.0% |", table)
        self.assertIn("| base | 85.2% |", table)  # 52000 / 61000
        self.assertIn("| new | 90.2% |", table)   # 55000 / 61000
        # swa's rows come before Bifocal's, as the bench ran them.
        self.assertLess(table.index(f"| {SWA} | 1K | base"), table.index(f"| {BIFOCAL} | 1K | base"))

    def test_builds_txt_orders_the_builds(self):
        self.write_two_builds()
        with open(os.path.join(self.root, "builds.txt"), "w") as f:
            f.write("new\nbase\n")
        runs, builds = ab_summary.read_runs(self.root)
        self.assertEqual(builds, ["new", "base"])
        table = ab_summary.summarise(runs, builds)
        self.assertIn(f"| {BIFOCAL} | 1K | base | 51000 / 53000 | 52000 | -5.5% |", table)

    def test_decode_metric(self):
        self.write_run("a.qwen3-4b.1", [row(SWA, 2048, 60000, decode=380.0)])
        self.write_run("b.qwen3-4b.1", [row(SWA, 2048, 60000, decode=399.0)])
        runs, builds = ab_summary.read_runs(self.root)
        table = ab_summary.summarise(runs, builds, "decode")
        self.assertIn(f"| {SWA} | 2K | b | 399 | 399 | +5.0% |", table)

    def test_spread_is_the_interquartile_range_from_four_rounds(self):
        self.write_two_builds()  # two rounds each: no spread
        for number, value in [(3, 52000), (4, 53000)]:
            self.write_run(f"base.qwen3-4b.{number}", [row(SWA, 1024, 61000), row(BIFOCAL, 1024, value - 3000)])
        runs, builds = ab_summary.read_runs(self.root)
        table = ab_summary.summarise(runs, builds)
        # base's Bifocal: 51000 / 53000 / 49000 / 50000 -> quartiles (exclusive) 49250 and 52500, median 50500:
        # (52500 − 49250) / 50500 = 6.4%.
        self.assertIn(f"| {BIFOCAL} | 1K | base | 51000 / 53000 / 49000 / 50000 | 50500 |  | 6.4% |", table)
        self.assertIn(f"| {BIFOCAL} | 1K | new | 54000 / 56000 | 55000 | +8.9% |  |", table)
        self.assertIn("| change | spread |", table)

    def test_rows_without_the_metric_are_left_out(self):
        self.write_run("a.qwen3-4b.1", [row(SWA, 1024, None), row(BIFOCAL, 1024, 50000)])
        runs, builds = ab_summary.read_runs(self.root)
        table = ab_summary.summarise(runs, builds)
        self.assertNotIn(f"| {SWA} |", table)
        self.assertIn(f"| {BIFOCAL} | 1K | a | 50000 | 50000 |  |", table)

    def test_unreadable_folders_are_errors_naming_them(self):
        with redirect_stderr(io.StringIO()) as err:
            self.assertEqual(ab_summary.main([self.root]), 1)
        self.assertIn("no BUILD.SHAPE.ROUND/bench.json", err.getvalue())
        self.write_run("badname", [row(SWA, 1024, 1.0)])
        with redirect_stderr(io.StringIO()) as err:
            self.assertEqual(ab_summary.main([self.root]), 1)
        self.assertIn("badname: expected a run folder named BUILD.SHAPE.ROUND", err.getvalue())


class AbBenchArgumentsTest(unittest.TestCase):
    """ab_bench.sh refuses what is not NAME=BUNDLE before it runs anything (no GPU needed)."""

    def run_ab_bench(self, *arguments):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ab_bench.sh")
        with tempfile.TemporaryDirectory() as out:
            return subprocess.run(["bash", script, *arguments], capture_output=True, text=True,
                                  env={**os.environ, "OUT": out})

    def test_no_argument_is_the_usage(self):
        run = self.run_ab_bench()
        self.assertEqual(run.returncode, 2)
        self.assertIn("usage: tools/cuda/ab_bench.sh NAME=BUNDLE", run.stderr)

    def test_malformed_pairs_are_named(self):
        with tempfile.NamedTemporaryFile(suffix=".tar.xz") as bundle:
            for pair in ["main", "=" + bundle.name, "a.b=" + bundle.name, "main=/no/such/bundle.tar.xz"]:
                run = self.run_ab_bench(pair)
                self.assertEqual(run.returncode, 2, pair)
                self.assertIn("'%s' is not NAME=BUNDLE" % pair, run.stderr)


class AbBenchRoundsTest(unittest.TestCase):
    """ab_bench.sh's rounds, with a stand-in for run_on_device.sh that writes a bench.json and
    takes 1.2 s (in round 2 it first copies ab.md aside): ab.md after every round, and no round
    started after ROUNDS_UNTIL_S."""

    STAND_IN = """#!/usr/bin/env bash
out=$(echo "$1" | sed -n 's/.* --out \\([^ ]*\\).*/\\1/p')
case "$out" in *.2) cp "$(dirname "$out")/ab.md" "$(dirname "$out")/../ab-during-round-2.md" ;; esac
sleep 1.2
printf '{"rows": [{"mixer": "%s", "context": 1024, "prefill_tokens_per_second": 60000, "decode_tokens_per_second": 400}, {"mixer": "%s", "context": 1024, "prefill_tokens_per_second": 54000, "decode_tokens_per_second": 390}]}' "$SWA" "$BIFOCAL" > "$out/bench.json"
"""

    def run_with_stand_in(self, out, **settings):
        """ab_bench.sh of one build from a copy of tools/cuda whose run_on_device.sh is STAND_IN."""
        here = os.path.dirname(os.path.abspath(__file__))
        with tempfile.TemporaryDirectory() as root:
            tools = os.path.join(root, "tools", "cuda")
            os.makedirs(tools)
            for name in ("ab_bench.sh", "ab_summary.py"):
                with open(os.path.join(here, name)) as source, open(os.path.join(tools, name), "w") as copy:
                    copy.write(source.read())
            with open(os.path.join(tools, "run_on_device.sh"), "w") as f:
                f.write(self.STAND_IN)
            bundle = os.path.join(root, "main.tar.xz")
            open(bundle, "w").close()
            return subprocess.run(["bash", os.path.join(tools, "ab_bench.sh"), "main=" + bundle], capture_output=True,
                                  text=True, env={**os.environ, "OUT": out, "SHAPES": "qwen3-4b", "SWA": SWA,
                                                  "BIFOCAL": BIFOCAL, **settings})

    def test_rounds_stop_at_the_time_given(self):
        with tempfile.TemporaryDirectory() as out:
            run = self.run_with_stand_in(out, ROUNDS="5", ROUNDS_UNTIL_S="1")
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("1 s passed: no round 2", run.stderr)
            self.assertEqual(sorted(os.listdir(os.path.join(out, "ab"))), ["ab.md", "builds.txt", "main.qwen3-4b.1"])
            with open(os.path.join(out, "ab", "ab.md")) as f:
                summary = f.read()
            self.assertIn(f"| {BIFOCAL} | 1K | main | 54000 | 54000 |  |", summary)
            self.assertIn(summary, run.stdout)  # and printed at the end

    def test_each_round_leaves_the_summary_of_the_rounds_so_far(self):
        with tempfile.TemporaryDirectory() as out:
            run = self.run_with_stand_in(out, ROUNDS="2")
            self.assertEqual(run.returncode, 0, run.stderr)
            with open(os.path.join(out, "ab-during-round-2.md")) as f:  # copied by round 2's stand-in
                during = f.read()
            self.assertIn(f"| {BIFOCAL} | 1K | main | 54000 | 54000 |  |", during)  # round 1 alone
            self.assertIn(f"| {BIFOCAL} | 1K | main | 54000 / 54000 | 54000 |  |", run.stdout)  # both at the end

    def test_an_earlier_calls_runs_are_not_summarised(self):
        # A warm machine keeps the last call's folder: a build it ran, and a later round of this one's.
        with tempfile.TemporaryDirectory() as out:
            for earlier in ("probe.qwen3-4b.1", "main.qwen3-4b.2"):
                os.makedirs(os.path.join(out, "ab", earlier))
                with open(os.path.join(out, "ab", earlier, "bench.json"), "w") as f:
                    f.write(f'{{"rows": [{{"mixer": "{BIFOCAL}", "context": 1024, "prefill_tokens_per_second": 1}}]}}')
            run = self.run_with_stand_in(out, ROUNDS="1")
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(sorted(os.listdir(os.path.join(out, "ab"))), ["ab.md", "builds.txt", "main.qwen3-4b.1"])
            self.assertIn(f"| {BIFOCAL} | 1K | main | 54000 | 54000 |  |", run.stdout)
            self.assertNotIn("probe", run.stdout)


if __name__ == "__main__":
    unittest.main()
