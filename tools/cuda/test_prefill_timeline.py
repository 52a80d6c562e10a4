"""prefill_timeline.py on hand-made timelines whose layer spans and per-kernel additions are known."""
import io
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import prefill_timeline  # noqa: E402

HEADER = "start_ns,end_ns,stream,graph_node,grid_blocks,block_threads,name\n"


def row(start, end, name, node=0, grid=132):
    return f'{start},{end},7,{node},{grid},256,"void bifocal::cuda::(anonymous namespace)::{name}(int)"\n'


def prefill_pass(t, layers=4, attention_us=60):
    """embedding, then `layers` of (qk_norm_rope, gather, attention, o_proj), then the LM head.
    The gather starts 2 µs before the norm ends (an early launch); o_proj waits 1 µs."""
    rows = [row(t, t + 3000, "embedding_kernel")]
    t += 3000
    for _ in range(layers):
        rows.append(row(t, t + 16000, "qk_norm_rope_kernel<__nv_bfloat16>"))  # adds 16
        rows.append(row(t + 14000, t + 22000, "gather_window_kernel"))       # adds 6
        rows.append(row(t + 20000, t + 20000 + attention_us * 1000, "attention_kernel", grid=512))
        t += 20000 + attention_us * 1000                                     # adds attention_us − 2
        rows.append(row(t + 1000, t + 35000, "nvjet_sm90_tss_168x128"))       # adds 35
        t += 35000
    rows.append(row(t, t + 30000, "lm_head_kernel"))
    return rows, t + 30000


class PrefillTimelineTest(unittest.TestCase):
    def timeline(self):
        text = HEADER + row(0, 500, "fill_uniform_kernel")  # synthetic weights: left out
        rows, t = prefill_pass(1000, attention_us=70)        # the warm-up prefill
        text += "".join(rows)
        rows, t = prefill_pass(t + 5000)                     # the timed one: its numbers are reported
        text += "".join(rows)
        text += row(t + 1000, t + 2000, "fill_constant_kernel")
        # a decode step in a graph (node ≠ 0): left out
        text += row(t + 3000, t + 4000, "embedding_kernel", node=1) + row(t + 4000, t + 9000, "qk_norm_rope_kernel", node=2)
        return text

    def test_the_last_pass_layer_by_layer(self):
        report = prefill_timeline.summarise(prefill_timeline.read_records(io.StringIO(self.timeline())))
        # a layer: 20 + 60 + 35 = 115 µs from one norm's start to the next
        self.assertIn("Prefill pass 2 of 2: 4 layers; layer span median 115.0 µs (min 115.0, max 115.0", report)
        self.assertIn("Layer 2 of 4, µs from its qk_norm_rope_kernel start:", report)
        self.assertIn("| `qk_norm_rope_kernel<__nv_bfloat16>` | 132 × 256 | 0.0 | 16.0 | 16.0 | 16.0 |", report)
        self.assertIn("| `gather_window_kernel` | 132 × 256 | 14.0 | 22.0 | 8.0 | 6.0 |", report)
        self.assertIn("| `attention_kernel` | 512 × 256 | 20.0 | 80.0 | 60.0 | 58.0 |", report)
        self.assertIn("| `nvjet_sm90_tss_168x128` | 132 × 256 | 81.0 | 115.0 | 34.0 | 35.0 |", report)
        self.assertNotIn("fill_", report)
        self.assertNotIn("lm_head", report)  # the middle layer is not the last

    def test_the_pass_in_three_parts(self):
        report = prefill_timeline.summarise(prefill_timeline.read_records(io.StringIO(self.timeline())))
        # the timed pass: the 3 µs embedding, layers of 115 µs, the last one and the 30 µs LM head
        self.assertIn("The pass: 493.0 µs from its first kernel's start to its last one's end: 3.0 before the "
                      "first layer's qk_norm_rope_kernel, 345.0 from there to the last layer's (3 layers), 145.0 "
                      "in the last layer and after it", report)

    def test_each_kernels_median_over_the_full_layers(self):
        # four layers whose attention lasts 60, 90, 70 and 200 µs: the last layer is left out, so
        # the medians are the 70 µs layer's; o_proj starts 1 µs after the attention ends
        text = HEADER
        t = 1000
        text += row(t, t + 3000, "embedding_kernel")
        t += 3000
        for attention_us in (60, 90, 70, 200):
            text += row(t, t + 16000, "qk_norm_rope_kernel<__nv_bfloat16>")
            text += row(t + 20000, t + 20000 + attention_us * 1000, "attention_kernel", grid=512)
            t += 20000 + attention_us * 1000
            text += row(t + 1000, t + 35000, "nvjet_sm90_tss_168x128")
            text += row(t + 35000, t + 40000, "nvjet_sm90_tss_168x128")  # a second of that name
            t += 40000
        report = prefill_timeline.summarise(prefill_timeline.read_records(io.StringIO(text)))
        medians = report[report.index("Each kernel's median over the 3 full layers"):]
        self.assertIn("| `qk_norm_rope_kernel<__nv_bfloat16>` | 132 | 0.0 | 16.0 | 16.0 |", medians)
        self.assertIn("| `attention_kernel` | 512 | 20.0 | 90.0 | 70.0 |", medians)
        self.assertIn("| `nvjet_sm90_tss_168x128` | 132 | 91.0 | 125.0 | 34.0 |", medians)
        self.assertIn("| `nvjet_sm90_tss_168x128` (#2) | 132 | 125.0 | 130.0 | 5.0 |", medians)
        self.assertLess(medians.index("attention_kernel"), medians.index("(#2)"))  # in order of start

    def test_a_decode_only_run_is_refused_by_name(self):
        text = HEADER + row(0, 1000, "embedding_kernel", node=1) + row(1000, 2000, "qk_norm_rope_kernel", node=2)
        with self.assertRaisesRegex(ValueError, "no prefill pass"):
            prefill_timeline.summarise(prefill_timeline.read_records(io.StringIO(text)))

    def test_the_command_line_names_the_file_on_error(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("not,a,timeline\n")
        try:
            result = subprocess.run([sys.executable, prefill_timeline.__file__, f.name], capture_output=True, text=True)
        finally:
            os.unlink(f.name)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f.name, result.stderr)
        self.assertIn("not a kernel_timeline CSV", result.stderr)


if __name__ == "__main__":
    unittest.main()
