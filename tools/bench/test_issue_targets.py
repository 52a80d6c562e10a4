"""issue_targets.py on hand-made bench files at each target's edge (just met, just missed, a context
missing), its card note, its errors for files it cannot read, and on the committed tables of
docs/performance/, whose statuses docs/performance.md's targets table states."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import issue_targets as it  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SWA, BIFOCAL = "swa:window=576,sink=learned", "bifocal:window=448,sink=learned,state=kv"
CONTEXTS = [1024, 32768, 131072, 262144]


def row(mixer, context, ratio=0.9, decode=400.0, prefill=None, peak=9_000_000_000, cache=1000, accounted=1000):
    return {"mixer": mixer, "context": context, "roofline_ratio": ratio, "decode_tokens_per_second": decode,
            "prefill_tokens_per_second": prefill, "peak_device_bytes": peak, "cache_bytes": cache,
            "accounted_cache_bytes": accounted}


def bench(rows, model="qwen3-4b", device="NVIDIA H200"):
    return it.Bench("bench.json", model, device, "2026-12-05", rows)


def status_of(name, benches):
    [target] = [t for t in it.evaluate(benches) if t.name == name]
    return [v.status for _, v in target.results] or ["not measured"]


ROOFLINE = "qwen3-4b swa decode ≥ 85% of the roofline, 1K–256K"
PREFILL = "Bifocal prefill ≥ 90% of swa's (qwen3-4b)"
DECODE_SHARE = "Bifocal decode within 3% of swa (qwen3-4b)"
SPREAD = "qwen3-4b decode spread 1K–256K ≤ 5%"
MEMORY = "qwen3-4b swa peak device memory at 256K = at 1K"
FIG2 = "paper-fig2 swa 64 and 512 ≥ 8,000 tok/s to 256K"


class SpecTest(unittest.TestCase):
    def test_a_row_matches_when_it_holds_every_key_the_target_names(self):
        self.assertTrue(it.spec_matches(BIFOCAL, "bifocal:window=448,state=kv"))
        self.assertFalse(it.spec_matches("bifocal:window=320,sink=learned,state=kv", "bifocal:window=448,state=kv"))
        self.assertFalse(it.spec_matches("swa:window=448", "bifocal:window=448"))
        self.assertFalse(it.spec_matches("swa:window=576,sink=none", SWA))
        self.assertTrue(it.spec_matches("full", "full"))
        self.assertTrue(it.spec_matches("swa:window=64,sinks=4", "swa:window=64"))


class TargetEdgeTest(unittest.TestCase):
    def test_roofline_met_at_the_line_and_missed_below_it(self):
        self.assertEqual(status_of(ROOFLINE, [bench([row(SWA, c, ratio=0.85) for c in CONTEXTS])]), ["met"])
        rows = [row(SWA, c, ratio=0.85) for c in CONTEXTS]
        rows[2]["roofline_ratio"] = 0.849
        self.assertEqual(status_of(ROOFLINE, [bench(rows)]), ["not met"])

    def test_a_table_without_256k_is_incomplete_not_met(self):
        result = it.evaluate([bench([row(SWA, c, ratio=0.95) for c in CONTEXTS[:2]])])
        [(_, verdict)] = [t for t in result if t.name == ROOFLINE][0].results
        self.assertEqual(verdict.status, "incomplete")
        self.assertIn("missing 256K", verdict.measured)

    def test_contexts_outside_1k_to_256k_do_not_count(self):
        rows = [row(SWA, c, ratio=0.9) for c in CONTEXTS] + [row(SWA, 512, ratio=0.1)]
        self.assertEqual(status_of(ROOFLINE, [bench(rows)]), ["met"])

    def test_prefill_share_at_90_percent(self):
        def rows(bifocal_prefill):
            return [row(SWA, 1024, prefill=60000.0), row(BIFOCAL, 1024, prefill=bifocal_prefill),
                    row(SWA, 131072), row(BIFOCAL, 131072)]  # no prefill there: not counted
        self.assertEqual(status_of(PREFILL, [bench(rows(54000.0))]), ["met"])
        self.assertEqual(status_of(PREFILL, [bench(rows(53990.0))]), ["not met"])

    def test_decode_share_within_3_percent(self):
        self.assertEqual(status_of(DECODE_SHARE, [bench([row(SWA, 1024, decode=400.0),
                                                          row(BIFOCAL, 1024, decode=388.0)])]), ["met"])
        self.assertEqual(status_of(DECODE_SHARE, [bench([row(SWA, 1024, decode=400.0),
                                                          row(BIFOCAL, 1024, decode=387.9)])]), ["not met"])

    def test_spread_of_5_percent(self):
        def rows(fastest):
            speeds = [400.0, 410.0, fastest, 405.0]
            return [row(m, c, decode=s) for m in (SWA, BIFOCAL) for c, s in zip(CONTEXTS, speeds)]
        self.assertEqual(status_of(SPREAD, [bench(rows(420.0))]), ["met"])
        self.assertEqual(status_of(SPREAD, [bench(rows(420.1))]), ["not met"])

    def test_peak_memory_equal_at_1k_and_256k_and_cache_as_accounted(self):
        flat = [row(SWA, c) for c in CONTEXTS]
        self.assertEqual(status_of(MEMORY, [bench(flat)]), ["met"])
        grown = [row(SWA, c) for c in CONTEXTS]
        grown[-1]["peak_device_bytes"] += 1
        self.assertEqual(status_of(MEMORY, [bench(grown)]), ["not met"])
        unaccounted = [row(SWA, c) for c in CONTEXTS]
        unaccounted[1]["cache_bytes"] = 1001
        self.assertEqual(status_of(MEMORY, [bench(unaccounted)]), ["not met"])

    def test_paper_fig2_needs_both_windows_at_8000_to_256k(self):
        def rows(slowest):
            return [row("swa:window=64,sinks=4", c, decode=9000.0) for c in (1024, 32768, 262144)] + \
                   [row("swa:window=512,sinks=4", c, decode=s) for c, s in ((1024, 8600.0), (32768, slowest),
                                                                            (262144, 8500.0))]
        self.assertEqual(status_of(FIG2, [bench(rows(8000.0), model="paper-fig2")]), ["met"])
        self.assertEqual(status_of(FIG2, [bench(rows(7999.0), model="paper-fig2")]), ["not met"])

    def test_a_target_is_checked_only_on_its_shape_with_its_mixers(self):
        other_shape = bench([row(SWA, c, ratio=0.9) for c in CONTEXTS], model="qwen3.5-4b-like")
        self.assertEqual(status_of(ROOFLINE, [other_shape]), ["not measured"])
        self.assertEqual(status_of(PREFILL, [bench([row(SWA, 1024, prefill=1.0)])]), ["not measured"])


class ReportTest(unittest.TestCase):
    def test_a_file_from_another_card_says_the_target_is_the_h200s(self):
        rows = [row(SWA, c, ratio=0.9) for c in CONTEXTS]
        table = it.markdown(it.evaluate([bench(rows, device="NVIDIA H100 80GB HBM3")]))
        line = [x for x in table.splitlines() if x.startswith("| " + ROOFLINE)][0]
        self.assertIn("met (on NVIDIA H100 80GB HBM3; the target is the H200's)", line)
        table = it.markdown(it.evaluate([bench(rows)]))
        line = [x for x in table.splitlines() if x.startswith("| " + ROOFLINE)][0]
        self.assertTrue(line.endswith("| met |"), line)
        self.assertIn("| full at 128K ≥ 80% of its roofline | — | — | not measured |", table)

    def test_main_writes_the_table_and_json(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "bench.json")
            with open(path, "w") as f:
                json.dump({"model": "qwen3-4b", "device": "NVIDIA H200", "date": "2026-12-05",
                           "rows": [row("full", 131072, ratio=0.81)]}, f)
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(it.main([path, "--out", os.path.join(folder, "t")]), 0)
            self.assertIn("| full at 128K ≥ 80% of its roofline | `bench.json` (NVIDIA H200, 2026-12-05) | "
                          "full at 128K: 0.810 | met |", out.getvalue())
            with open(os.path.join(folder, "t", "targets.md")) as f:
                self.assertEqual(f.read(), out.getvalue())
            with open(os.path.join(folder, "t", "targets.json")) as f:
                [full] = [t for t in json.load(f) if t["target"].startswith("full")]
            self.assertEqual(full["results"][0]["status"], "met")
            self.assertTrue(full["results"][0]["on_target_card"])


class BadInputTest(unittest.TestCase):
    def write(self, folder, text):
        path = os.path.join(folder, "x.json")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_malformed_json_names_the_file(self):
        with tempfile.TemporaryDirectory() as folder:
            path = self.write(folder, '{"model": "qwen3-4b", "rows": [')
            with self.assertRaises(SystemExit) as caught:
                it.Bench.load(path)
            self.assertIn(path, str(caught.exception))

    def test_a_row_without_its_fields_names_the_row_and_the_fields(self):
        with tempfile.TemporaryDirectory() as folder:
            path = self.write(folder, json.dumps({"model": "qwen3-4b", "rows": [row(SWA, 1024), {"mixer": SWA}]}))
            with self.assertRaises(SystemExit) as caught:
                it.Bench.load(path)
            self.assertIn(f"{path}: row 1 lacks context", str(caught.exception))

    def test_json_of_another_kind_is_skipped_with_a_warning_and_none_at_all_is_an_error(self):
        with tempfile.TemporaryDirectory() as folder:
            path = self.write(folder, json.dumps({"meta": {}, "rows": []}))
            err = io.StringIO()
            with redirect_stderr(err), self.assertRaises(SystemExit) as caught:
                it.main([path])
            self.assertIn(f"{path}: skipped, not a bifocal bench JSON", err.getvalue())
            self.assertIn("none of the files is a bifocal bench JSON", str(caught.exception))


class CommittedTablesTest(unittest.TestCase):
    """The H200 tables docs/performance.md's targets table quotes, with the statuses it gives them."""

    def statuses(self, *names):
        benches = [it.Bench.load(os.path.join(ROOT, "docs", "performance", name)) for name in names]
        return {t.name: [v.status for _, v in t.results] for t in it.evaluate(benches)}

    def test_stop_41s_decode_tables_miss_85_percent_and_meet_the_rest(self):
        got = self.statuses("qwen3-4b.json", "qwen3.5.json", "qwen3-4b-full.json", "paper-fig2.json")
        self.assertEqual(got[ROOFLINE], ["not met"])  # 0.748–0.749
        self.assertEqual(got["qwen3.5-4b-like Bifocal ≥ 85% of the roofline"], ["not met"])  # 0.708–0.710
        self.assertEqual(got[SPREAD], ["met"])
        self.assertEqual(got[DECODE_SHARE], ["met"])
        self.assertEqual(got["full at 128K ≥ 80% of its roofline"], ["met"])  # 0.833
        self.assertEqual(got[FIG2], ["met"])
        self.assertEqual(got[MEMORY], ["met"])
        self.assertEqual(got["qwen3.5-4b-like swa peak device memory at 256K = at 1K"], ["met"])


if __name__ == "__main__":
    unittest.main()
