"""Tests for the PyTorch peers' GPU-free parts (peer_pytorch.py and its modules): the shape table
against the C++ source, argument resolution, bench.json matching, tables, a whole run from a stored
peer.json, the compiled peer's cache sizing and write-position cursor (on stand-in counters), and
the process-per-row runner (with fake workers that crash, hang and assert). Needs no torch.

Run from the repository root:  python3 -m unittest tools/bench/test_peer_pytorch.py -v
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import time
import types
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peer_compiled as C  # noqa: E402
import peer_models as M  # noqa: E402
import peer_pytorch as P  # noqa: E402
import peer_report as R  # noqa: E402
import peer_runner as RUN  # noqa: E402
import peer_shapes as S  # noqa: E402

# A bench.json as `bifocal bench --shape qwen3-4b --mixer full --mixer swa:window=576
# --mixer bifocal:window=448,state=kv --context 1k,8k --out OUT` writes it (bench_report.cpp),
# trimmed to the fields the matching reads plus a few it ignores.
BENCH_JSON = {
    "command": "bifocal bench --shape qwen3-4b --mixer full --mixer swa:window=576 --context 1k,8k --gen 128 --repeat 3",
    "date": "2026-12-01", "device": "NVIDIA H200", "model": "qwen3-4b", "dtype": "bf16",
    "generated_tokens": 128, "repeats": 3,
    "rows": [
        {"mixer": "full", "context": 1024, "decode_tokens_per_second": 200.0, "roofline_ratio": 0.8},
        {"mixer": "full", "context": 8192, "decode_tokens_per_second": 180.0, "roofline_ratio": 0.8},
        {"mixer": "swa:window=576,sinks=4", "context": 1024, "decode_tokens_per_second": 210.0},
        {"mixer": "swa:window=576,sinks=4", "context": 8192, "decode_tokens_per_second": 209.0},
        {"mixer": "bifocal:window=448,sink=learned,state=kv", "context": 1024, "decode_tokens_per_second": 190.0},
    ],
}


def peer_row(peer, attention, context, speed=None, reason=None, shape="qwen3-4b"):
    row = {"shape": shape, "peer": peer, "attention": attention, "context": context, "notes": []}
    if speed is None:
        row.update(status="skipped", reason=reason or "?")
    else:
        row.update(status="ok", decode_tokens_per_second=speed)
    return row


PEER_ROWS = [
    peer_row("eager", "full", 1024, 40.0),
    peer_row("eager", "full", 8192, None, "out of memory (OutOfMemoryError: CUDA out of memory)"),
    peer_row("compiled", "full", 1024, 100.0),
    peer_row("compiled", "full", 8192, 90.0),
    peer_row("eager", "sliding:window=576", 1024, 42.0),
    peer_row("eager", "sliding:window=576", 8192, 41.8),
    peer_row("compiled", "sliding:window=576", 1024, 105.0),
    # compiled sliding at 8K deliberately absent: "missing"
]


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.temp = tempfile.TemporaryDirectory()
        self.addCleanup(self.temp.cleanup)

    def path(self, name):
        return os.path.join(self.temp.name, name)

    def write_json(self, name, value):
        with open(self.path(name), "w", encoding="utf-8") as f:
            json.dump(value, f)
        return self.path(name)


class ShapeTests(unittest.TestCase):
    def test_copy_matches_the_cpp_source(self):
        with open(os.path.join(S.REPO_ROOT, S.BUDGET_SOURCE), encoding="utf-8") as f:
            self.assertEqual(S.parse_builtin_shapes(f.read()), S.BUILTIN_SHAPES)
        with open(os.path.join(S.REPO_ROOT, S.SYNTHETIC_SOURCE), encoding="utf-8") as f:
            self.assertEqual(S.parse_synthetic_config(f.read()), S.SYNTHETIC_CONFIG)
        shapes, synthetic, source = S.load_shapes(S.REPO_ROOT)
        self.assertEqual(shapes, S.BUILTIN_SHAPES)
        self.assertIn("budget.cpp", source)

    def test_parse_ignores_comments_and_reads_native_window(self):
        text = '''const std::vector<ModelShape>& builtin_shapes() {
          static const std::vector<ModelShape> shapes{
              // {"not-a-shape", 1, 2, 3, 4, {5, 6, 7, 8}},
              {"tiny", 2, 64, 128, 1000, {4, 2, 16, 32}},
          };
          return shapes;
        }
        const ModelShape& other() { {"after", 1, 1, 1, 1, {1, 1, 1, 1}}; }'''
        self.assertEqual(S.parse_builtin_shapes(text), {"tiny": S.ModelShape("tiny", 2, 64, 128, 1000, 4, 2, 16, 32)})

    def test_missing_source_falls_back_to_the_copy(self):
        shapes, synthetic, source = S.load_shapes("/nonexistent")
        self.assertEqual(shapes, S.BUILTIN_SHAPES)
        self.assertEqual(synthetic, S.SYNTHETIC_CONFIG)
        self.assertIn("copy", source)

    def test_qwen3_config_matches_bifocal_synthetic_config(self):
        kwargs = S.qwen3_config_kwargs(S.BUILTIN_SHAPES["qwen3-4b"], S.SYNTHETIC_CONFIG)
        self.assertEqual((kwargs["num_hidden_layers"], kwargs["hidden_size"], kwargs["intermediate_size"]), (36, 2560, 9728))
        self.assertEqual((kwargs["num_attention_heads"], kwargs["num_key_value_heads"], kwargs["head_dim"]), (32, 8, 128))
        self.assertEqual(kwargs["vocab_size"], 151936)
        self.assertTrue(kwargs["tie_word_embeddings"])
        self.assertEqual(kwargs["rms_norm_eps"], 1e-6)
        self.assertFalse(kwargs["use_sliding_window"])
        sliding = S.qwen3_config_kwargs(S.BUILTIN_SHAPES["paper-fig2"], S.SYNTHETIC_CONFIG, window=576)
        self.assertEqual((sliding["use_sliding_window"], sliding["sliding_window"], sliding["max_window_layers"]),
                         (True, 576, 0))


class ParsingTests(unittest.TestCase):
    def test_contexts(self):
        self.assertEqual(S.parse_contexts("1k,8k,32k"), [1024, 8192, 32768])
        self.assertEqual(S.parse_contexts("8K, 1k,1024,100"), [100, 1024, 8192])
        for bad in ("", "1k,,2k", "0", "-1", "1m", "k"):
            with self.assertRaises(ValueError, msg=bad):
                S.parse_contexts(bad)

    def test_context_label(self):
        self.assertEqual([S.context_label(n) for n in (1024, 32768, 1000)], ["1K", "32K", "1000"])

    def test_mixers_map_to_peer_attention(self):
        self.assertEqual(R.peer_attention_for(R.parse_mixer("full")), ("full", True, ""))
        attention, like, note = R.peer_attention_for(R.parse_mixer("swa:window=576,sinks=4"))
        self.assertEqual((attention, like), ("sliding:window=576", True))
        self.assertIn("4 sink tokens", note)
        attention, like, note = R.peer_attention_for(R.parse_mixer("swa:window=64,sink=learned"))
        self.assertEqual(attention, "sliding:window=64")
        self.assertIn("learned sink", note)
        self.assertNotIn("sink tokens", note)
        self.assertEqual(R.peer_attention_for(R.parse_mixer("swa:window=64,sink=none"))[2], "")
        attention, like, note = R.peer_attention_for(R.parse_mixer("bifocal:window=448,sink=learned,state=kv"))
        self.assertEqual((attention, like), ("full", False))
        self.assertIn("no PyTorch peer for bifocal", note)

    def test_arguments_repeat_and_default(self):
        args = P.build_arg_parser().parse_args(
            ["--shape", "qwen3-4b", "--shape", "paper-fig2", "--context", "1k,8k", "--bifocal-json", "a.json",
             "--bifocal-json", "b.json", "--window", "64", "--peer", "compiled"])
        self.assertEqual(args.shape, ["qwen3-4b", "paper-fig2"])
        self.assertEqual(args.bifocal_json, ["a.json", "b.json"])
        self.assertEqual((args.gen, args.repeat, args.fill), (128, 3, "random"))
        plan = P.resolve_plan(args, [], S.BUILTIN_SHAPES)
        self.assertEqual(plan, P.Plan(["qwen3-4b", "paper-fig2"], [1024, 8192], [64], ["compiled"]))

    def test_unknown_shape_is_an_error(self):
        args = P.build_arg_parser().parse_args(["--shape", "qwen9"])
        with self.assertRaisesRegex(ValueError, "known: qwen3-4b"):
            P.resolve_plan(args, [], S.BUILTIN_SHAPES)

    def test_command_line_quotes(self):
        self.assertEqual(P.command_line(["--out", "a b", "--context", "1k,8k"]),
                         "python3 tools/bench/peer_pytorch.py --out 'a b' --context 1k,8k")


class MatchingTests(TempDirTest):
    def bifocal_rows(self):
        return R.load_bifocal_json(self.write_json("bench.json", BENCH_JSON))

    def test_load_reads_every_row(self):
        rows = self.bifocal_rows()
        self.assertEqual(len(rows), 5)
        self.assertEqual((rows[2].shape, rows[2].mixer, rows[2].context, rows[2].decode_tokens_per_second),
                         ("qwen3-4b", "swa:window=576,sinks=4", 1024, 210.0))
        self.assertEqual(rows[0].generated_tokens, 128)
        with self.assertRaises(ValueError):
            R.load_bifocal_json(self.write_json("other.json", {"rows": []}))

    def test_plan_defaults_come_from_the_bench_json(self):
        args = P.build_arg_parser().parse_args([])
        plan = P.resolve_plan(args, self.bifocal_rows(), S.BUILTIN_SHAPES)
        self.assertEqual(plan, P.Plan(["qwen3-4b"], [1024, 8192], [576], ["eager", "compiled"]))
        self.assertEqual(P.resolve_plan(args, [], S.BUILTIN_SHAPES).contexts, [1024, 8192, 32768])

    def test_match_by_shape_context_and_mixer(self):
        comparisons = R.match_rows(self.bifocal_rows(), PEER_ROWS, S.BUILTIN_SHAPES)
        by_key = {(c["bifocal_mixer"], c["context"]): c for c in comparisons}
        self.assertEqual(len(comparisons), 5)

        full_1k = by_key[("full", 1024)]
        self.assertEqual(full_1k["peer_attention"], "full")
        self.assertAlmostEqual(full_1k["peers"]["eager"]["ratio"], 5.0)
        self.assertAlmostEqual(full_1k["peers"]["compiled"]["ratio"], 2.0)

        full_8k = by_key[("full", 8192)]
        self.assertEqual(full_8k["peers"]["eager"]["status"], "skipped")
        self.assertIn("out of memory", full_8k["peers"]["eager"]["reason"])
        self.assertNotIn("ratio", full_8k["peers"]["eager"])
        self.assertAlmostEqual(full_8k["peers"]["compiled"]["ratio"], 2.0)

        swa_1k = by_key[("swa:window=576,sinks=4", 1024)]
        self.assertEqual(swa_1k["peer_attention"], "sliding:window=576")
        self.assertAlmostEqual(swa_1k["peers"]["eager"]["ratio"], 5.0)
        self.assertAlmostEqual(swa_1k["peers"]["compiled"]["ratio"], 2.0)
        self.assertTrue(swa_1k["like_for_like"])

        swa_8k = by_key[("swa:window=576,sinks=4", 8192)]
        self.assertAlmostEqual(swa_8k["peers"]["eager"]["ratio"], 5.0)
        self.assertEqual(swa_8k["peers"]["compiled"]["status"], "missing")

        bifocal = by_key[("bifocal:window=448,sink=learned,state=kv", 1024)]
        self.assertFalse(bifocal["like_for_like"])
        self.assertAlmostEqual(bifocal["peers"]["compiled"]["ratio"], 1.9)

    def test_sliding_rows_never_match_full_ones(self):
        only_full = [r for r in PEER_ROWS if r["attention"] == "full"]
        comparisons = R.match_rows(self.bifocal_rows(), only_full, S.BUILTIN_SHAPES)
        swa = [c for c in comparisons if c["bifocal_mixer"].startswith("swa")]
        self.assertTrue(all(c["peers"][p]["status"] == "missing" for c in swa for p in S.PEERS))

    def test_other_shapes_and_checkpoints(self):
        report = dict(BENCH_JSON, model="/models/checkpoints/qwen3-4b/", dtype="fp32")
        rows = R.load_bifocal_json(self.write_json("ckpt.json", report))
        comparisons = R.match_rows(rows, PEER_ROWS, S.BUILTIN_SHAPES)
        self.assertAlmostEqual(comparisons[0]["peers"]["compiled"]["ratio"], 2.0)
        self.assertIn("bifocal ran fp32", comparisons[0]["notes"][-1])
        rows = R.load_bifocal_json(self.write_json("x.json", dict(BENCH_JSON, model="/models/llama")))
        comparisons = R.match_rows(rows, PEER_ROWS, S.BUILTIN_SHAPES)
        self.assertEqual(comparisons[0]["peers"]["eager"]["status"], "missing")
        self.assertIn("no builtin shape", comparisons[0]["notes"][-1])


class FormattingTests(TempDirTest):
    META = {"device": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0", "transformers": "5.0.0", "triton": "3.5.0",
            "date": "2026-12-01", "command": "python3 tools/bench/peer_pytorch.py", "shapes": ["qwen3-4b"],
            "generated_tokens": 128, "repeats": 3, "fill": "random K/V", "shape_source": "src/mixer/budget.cpp",
            "peer_descriptions": {"eager": "the eager loop", "compiled": "the compiled step"}}

    def test_tables(self):
        rows = R.load_bifocal_json(self.write_json("bench.json", BENCH_JSON))
        comparisons = R.match_rows(rows, PEER_ROWS, S.BUILTIN_SHAPES)
        md = R.render_markdown(self.META, PEER_ROWS, comparisons)
        lines = md.splitlines()
        self.assertIn("NVIDIA H200", lines[0])
        self.assertIn("torch 2.11.0 (CUDA 13.0), transformers 5.0.0", md)
        self.assertIn("| qwen3-4b | eager | full | 1K | 40.0 | 25.0 |  |", lines)
        self.assertIn("| qwen3-4b | eager | full | 8K | — | — | skipped: out of memory "
                      "(OutOfMemoryError: CUDA out of memory) |", lines)
        self.assertIn("| qwen3-4b | `full` | 1K | 200.0 | full | 40.0 | 5.00× | 100.0 | 2.00× |  |", lines)
        swa_8k = next(line for line in lines if "`swa:window=576,sinks=4` | 8K" in line)
        self.assertIn("| 41.8 | 5.00× | — | — |", swa_8k)
        self.assertIn("4 sink tokens", swa_8k)
        skipped = next(line for line in lines if "`full` | 8K" in line)
        self.assertIn("skipped: out of memory", skipped)
        bifocal = next(line for line in lines if "`bifocal:" in line)
        self.assertIn("full (not like for like)", bifocal)
        # Every table row has as many cells as its header.
        for table_start in (i for i, line in enumerate(lines) if line.startswith("| shape")):
            width = lines[table_start].count(" | ")
            for line in lines[table_start:]:
                if not line.startswith("|"):
                    break
                self.assertEqual(line.replace("\\|", "").count(" | "), width, line)

    def test_attention_setup_is_listed_once_per_shape_and_attention(self):
        rows = [dict(peer_row("eager", "sliding:window=64", c, 10.0), attention_setup="layer_types=sliding ×36")
                for c in (1024, 2048)]
        md = R.render_markdown(self.META, rows, [])
        self.assertEqual(md.count("* qwen3-4b, sliding:window=64: layer_types=sliding ×36"), 1)

    def test_pipes_in_reasons_do_not_split_cells(self):
        rows = [peer_row("eager", "full", 1024, None, "a | b")]
        self.assertIn("skipped: a \\| b", R.peer_table(rows))

    def test_no_comparison_section_without_bench_json(self):
        md = R.render_markdown(self.META, PEER_ROWS, [])
        self.assertIn("## Peer decode throughput", md)
        self.assertNotIn("## bifocal / peer", md)


class MainTests(TempDirTest):
    def test_compare_a_stored_peer_json_without_a_gpu(self):
        bench = self.write_json("bench.json", BENCH_JSON)
        peer = self.write_json("old_peer.json", {"meta": FormattingTests.META, "peer_rows": PEER_ROWS})
        out = self.path("peer")
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = P.main(["--peer-json", peer, "--bifocal-json", bench, "--out", out])
        self.assertEqual(code, 0, stderr.getvalue())
        self.assertIn("| bifocal / eager |", stdout.getvalue())
        with open(os.path.join(out, "peer.md"), encoding="utf-8") as f:
            self.assertEqual(f.read(), stdout.getvalue())
        with open(os.path.join(out, "peer.json"), encoding="utf-8") as f:
            document = json.load(f)
        self.assertEqual(len(document["comparisons"]), 5)
        self.assertEqual(document["peer_rows"], PEER_ROWS)
        self.assertEqual(document["bifocal_json"], [bench])
        self.assertFalse(document["partial"])

    def test_unreadable_bench_json_is_reported_not_fatal(self):
        peer = self.write_json("old_peer.json", {"meta": FormattingTests.META, "peer_rows": PEER_ROWS})
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = P.main(["--peer-json", peer, "--bifocal-json", self.path("absent.json")])
        self.assertEqual(code, 0)
        self.assertIn("absent.json: not read", stderr.getvalue())

    def test_modules_import_without_torch(self):
        # Only measuring imports torch (absent on development machines and CI).
        import peer_compiled, peer_models, peer_runner  # noqa: F401,E401
        if importlib.util.find_spec("torch") is None:
            self.assertNotIn("torch", sys.modules)
        self.assertNotIn("transformers", sys.modules)

    def test_timeout_per_row(self):
        self.assertEqual(P.build_arg_parser().parse_args([]).timeout_per_row, 150.0)
        args = P.build_arg_parser().parse_args(["--timeout-per-row", "0"])
        with self.assertRaisesRegex(ValueError, "--timeout-per-row"):
            P.resolve_plan(args, [], S.BUILTIN_SHAPES)

    @unittest.skipIf(importlib.util.find_spec("torch") is not None, "torch is installed here")
    def test_measuring_without_torch_says_so(self):
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = P.main(["--shape", "paper-fig2", "--context", "1k"])
        self.assertEqual(code, 1)
        self.assertIn("cannot measure here (no torch", stderr.getvalue())



# --------------------------------------------------------------------------------------------
# The compiled peer's cache arithmetic and write-position cursor (no torch: a stand-in tensor)
# --------------------------------------------------------------------------------------------

class FakeCounter:
    """Enough of a one-element int64 tensor for CacheCursor."""
    def __init__(self, value, dtype="int64"):
        self.value, self.dtype, self.shape = value, dtype, (1,)

    def numel(self):
        return 1

    def is_floating_point(self):
        return self.dtype.startswith("float")

    def is_complex(self):
        return False

    def detach(self):
        return self

    def clone(self):
        return FakeCounter(self.value, self.dtype)

    def item(self):
        return self.value

    def copy_(self, other):
        self.value = other.value
        return self

    def add_(self, n):
        self.value += n
        return self


FAKE_TORCH = types.SimpleNamespace(Tensor=FakeCounter, bool="bool")


class FakeLayer:
    """transformers 5.x's static layers: the write position a device tensor advanced in the graph;
    a sliding layer also keeps a Python int for its control flow."""
    def __init__(self, context, sliding):
        self.max_cache_len = 4096
        self.cumulative_length = FakeCounter(context)
        self.scale = FakeCounter(0.5, "float32")  # not a counter
        self.is_sliding = sliding
        if sliding:
            self.cumulative_length_int = context

    def step(self):  # what one compiled call does to the layer
        self.cumulative_length.add_(1)
        if self.is_sliding:
            self.cumulative_length_int += 1


class CompiledPeerTests(unittest.TestCase):
    def test_the_old_sizing_overran_without_a_rewind(self):
        # What failed on the H200 (context 1K, --gen 64, --repeat 3, 1096 slots): transformers 5.x
        # advanced the write position on every call and replay, and only our position tensors were
        # reset, so the compile call, 2 capture warm-ups, the 4-step warm-up and the timed repeats
        # added up past the cache in the second timed repeat.
        context, gen, old_slots = 1024, 64, 1024 + 64 + 8
        writes = context + C.untimed_steps(gen)
        self.assertEqual(C.untimed_steps(gen), 7)
        self.assertLess(writes + gen, old_slots)  # the first timed repeat fitted
        self.assertGreater(writes + 2 * gen, old_slots)  # the second did not: index 1096 of 1096

    def test_cache_fits_every_repeat_and_the_untimed_steps(self):
        for context, gen in ((1024, 64), (1024, 1), (32768, 128), (8, 3)):
            slots = C.static_cache_length(context, gen)
            self.assertGreaterEqual(slots, context + gen)  # rewound: the last write is context + gen - 1
            self.assertGreaterEqual(slots, context + C.untimed_steps(gen) + gen)  # not rewound: still one repeat
            self.assertIn(f"context + {gen} + {slots - context - gen} slots", C.cache_length_text(gen))

    def test_cursor_rewinds_tensor_and_int_counters(self):
        layers = [FakeLayer(1024, sliding=False), FakeLayer(1024, sliding=True)]
        cache = types.SimpleNamespace(layers=layers)
        cursor = C.CacheCursor(FAKE_TORCH, cache)
        self.assertEqual(cursor.tensor_names(), ["cumulative_length", "cumulative_length"])
        self.assertEqual(cursor.saved, [1024, 1024])
        tensors = [layer.cumulative_length for layer in layers]
        for layer in layers:
            layer.step()
        self.assertEqual(cursor.advance(), [1, 1])
        self.assertEqual(cursor.moved_ints(), ["cumulative_length_int"])
        cursor.hold_ints()  # between Python-dispatched steps: ints only
        self.assertEqual((layers[1].cumulative_length_int, layers[1].cumulative_length.value), (1024, 1025))
        for _ in range(63):
            for layer in layers:
                layer.step()
        self.assertIsNone(C.counter_drift(cursor.saved, [1, 1], [1088, 1088], 64))
        cursor.rewind()
        self.assertEqual(cursor.positions(), [1024, 1024])
        self.assertEqual(layers[1].cumulative_length_int, 1024)
        # In place: a captured graph keeps reading the same tensors.
        self.assertTrue(all(layer.cumulative_length is t for layer, t in zip(layers, tensors)))
        self.assertEqual(layers[0].scale.value, 0.5)

    def test_drift_is_caught_after_a_repeat(self):
        self.assertIsNone(C.counter_drift([1024], [1], [1088], 64))
        self.assertIsNone(C.counter_drift([1024], [0], [1024], 64))  # a counter that does not move per step
        self.assertIn("not rewound", C.counter_drift([1024], [1], [1095], 64))

    def test_sliding_window_that_fills_mid_decode_is_skipped(self):
        self.assertIsNone(C.sliding_window_problem(1024, 128, None))
        self.assertIsNone(C.sliding_window_problem(1024, 128, 576))  # full from the start
        self.assertIsNone(C.sliding_window_problem(256, 128, 576))  # never full
        self.assertIn("fill part-way", C.sliding_window_problem(512, 128, 576))


# --------------------------------------------------------------------------------------------
# A process per row (fake workers: no torch)
# --------------------------------------------------------------------------------------------

FAKE_WORKER = r"""
import json, os, signal, subprocess, sys, time
spec_path, result_path = sys.argv[1:]
spec = json.load(open(spec_path))
row, context = spec["row"], spec["row"]["context"]
def result(value):
    with open(result_path, "w") as f:
        json.dump(value, f)
meta = {"device": "Fake GPU", "torch": "0", "cuda": "0", "transformers": "0", "triton": "0"}
if context == 1:  # measured
    row.update(status="ok", decode_tokens_per_second=10.0 * spec["settings"]["gen"], step_ms=[1.0], notes=["fake"])
    result({"row": row, "meta": meta})
elif context == 2:  # a crash that reports nothing
    os.kill(os.getpid(), signal.SIGKILL)
elif context == 3:  # a hung compile with a compile worker of its own
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(os.path.join(os.environ["PEER_TEST_DIR"], "grandchild.pid"), "w") as f:
        f.write(str(child.pid))
    time.sleep(60)
elif context == 4:  # cannot measure here
    result({"fatal": "ModuleNotFoundError: No module named 'torch'"})
    sys.exit(1)
elif context == 5:  # reported, then hung in teardown
    row.update(status="skipped", reason="AcceleratorError: CUDA error: device-side assert triggered")
    result({"row": row, "meta": meta})
    time.sleep(60)
"""


class RunnerTests(TempDirTest):
    def setUp(self):
        super().setUp()
        with open(self.path("fake_worker.py"), "w", encoding="utf-8") as f:
            f.write(FAKE_WORKER)
        os.environ["PEER_TEST_DIR"] = self.temp.name
        self.addCleanup(os.environ.pop, "PEER_TEST_DIR", None)

    def runner(self, timeout=3.0):
        return RUN.RowRunner(M.Settings(gen=16), S.BUILTIN_SHAPES, S.SYNTHETIC_CONFIG, timeout,
                             worker_command=[sys.executable, self.path("fake_worker.py")])

    def rows(self, contexts):
        return RUN.plan_rows(["paper-fig2"], [], ["eager"], contexts, "random K/V")

    def run_quietly(self, runner, rows, on_row=lambda done, meta: None):
        with contextlib.redirect_stderr(io.StringIO()):
            return runner.run(rows, on_row)

    def assert_gone(self, pid):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                    if f.read().split(")")[-1].split()[0] == "Z":
                        return
            except FileNotFoundError:
                return
            time.sleep(0.05)
        self.fail(f"process {pid} still runs")

    def test_a_failing_row_does_not_stop_the_others(self):
        calls = []
        started = time.monotonic()
        # 5 s per row: a fresh worker's start took over 2 s under a loaded ctest -j2 once.
        rows = self.run_quietly(self.runner(timeout=5.0), self.rows([1, 2, 3, 5, 1]),
                                lambda done, meta: calls.append((len(done), meta)))
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual([r["status"] for r in rows], ["ok", "skipped", "skipped", "skipped", "ok"])
        self.assertEqual(rows[0]["decode_tokens_per_second"], 160.0)
        self.assertEqual(rows[0]["notes"], ["fake"])
        self.assertIn("ended with signal SIGKILL before reporting", rows[1]["reason"])
        self.assertIn("timed out after 5 s (--timeout-per-row)", rows[2]["reason"])
        self.assertIn("device-side assert", rows[3]["reason"])  # its report survives the hang after it
        self.assertTrue(all("wall_seconds" in r for r in rows))
        self.assertEqual([n for n, _ in calls], [1, 2, 3, 4, 5])  # outputs after every row
        self.assertEqual(calls[0][1]["device"], "Fake GPU")
        self.assertIsNone(calls[1][1])
        with open(self.path("grandchild.pid"), encoding="utf-8") as f:
            self.assert_gone(int(f.read()))  # the hung worker's own children went with it

    def test_no_torch_on_the_first_row_is_fatal(self):
        with self.assertRaisesRegex(RUN.WorkerUnavailable, "No module named 'torch'"):
            self.run_quietly(self.runner(), self.rows([4, 1]))

    def test_no_torch_later_skips_the_rest(self):
        rows = self.run_quietly(self.runner(), self.rows([1, 4, 1]))
        self.assertEqual([r["status"] for r in rows], ["ok", "skipped", "skipped"])
        self.assertTrue(all("not run: ModuleNotFoundError" in r["reason"] for r in rows[1:]))

    def test_main_writes_the_outputs_after_every_row(self):
        out = self.path("peer")
        written = []
        real_write = P.write_outputs

        def record(out_dir, markdown, peer_json):
            written.append((len(peer_json["peer_rows"]), peer_json["partial"]))
            real_write(out_dir, markdown, peer_json)

        fake_runner = lambda settings, shapes, synthetic, timeout: RUN.RowRunner(  # noqa: E731
            settings, shapes, synthetic, timeout, worker_command=[sys.executable, self.path("fake_worker.py")])
        with mock.patch.object(P, "write_outputs", record), mock.patch.object(P, "RowRunner", fake_runner), \
                mock.patch.object(P.importlib.util, "find_spec", return_value=object()):
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = P.main(["--shape", "paper-fig2", "--context", "1,2", "--peer", "eager", "--gen", "16",
                               "--timeout-per-row", "20", "--out", out])
        self.assertEqual(code, 0, stderr.getvalue())
        self.assertEqual(written, [(1, True), (2, False), (2, False)])
        with open(os.path.join(out, "peer.json"), encoding="utf-8") as f:
            document = json.load(f)
        self.assertEqual(document["meta"]["device"], "Fake GPU")
        self.assertEqual(document["meta"]["timeout_per_row"], 20.0)
        self.assertEqual([r["status"] for r in document["peer_rows"]], ["ok", "skipped"])
        self.assertIn("| paper-fig2 | eager | full | 1 | 160.0 |", stdout.getvalue())
        self.assertIn("context + 16 + 15 slots", document["meta"]["peer_descriptions"]["compiled"])

if __name__ == "__main__":
    unittest.main()
