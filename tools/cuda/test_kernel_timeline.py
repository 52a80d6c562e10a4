"""kernel_timeline.py on hand-made timelines whose step spans and per-kernel additions are known."""
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import kernel_timeline  # noqa: E402
import tool_test_support  # noqa: E402

HEADER = "start_ns,end_ns,stream,graph_node,grid_blocks,block_threads,name\n"


def row(start, end, node, name, grid=132):
    return f'{start},{end},7,{node},{grid},256,"void bifocal::cuda::(anonymous namespace)::{name}(int)"\n'


def step(offset):
    """embed, then 3 layers of (product, attention), then the head and the step kernel — node ids
    in capture order. The products start 1 µs before the kernel ahead of them ends (early launch)."""
    rows, t, node = [], offset, 1
    rows.append(row(t, t + 2000, node, "embedding_kernel")); t += 2000; node += 1
    for _ in range(3):
        rows.append(row(t - 1000, t + 5000, node, "gemv_kernel<float>")); t += 5000; node += 1  # adds 5 µs
        rows.append(row(t + 500, t + 3500, node, "attention_kernel")); t += 3500; node += 1    # adds 3.5 µs
    rows.append(row(t, t + 10000, node, "lm_head_kernel")); t += 10000; node += 1
    rows.append(row(t, t + 1000, node, "advance_decode_step_kernel")); t += 1000
    return rows, t


class KernelTimelineTest(unittest.TestCase):
    def timeline(self, steps=3, extra=""):
        text, t = HEADER, 0
        text += row(0, 500, 0, "fill_synthetic_kernel")  # not a graph kernel: left out
        t = 1000
        for _ in range(steps):
            rows, end = step(t)
            text += "".join(rows)
            t = end + 4000  # 4 µs between graph launches
        return kernel_timeline.read_records(io.StringIO(text + extra))

    def test_additions_sum_to_the_span_and_name_each_place(self):
        report = kernel_timeline.summarise(self.timeline())
        # span: 2 + 3 × (5 + 3.5) + 10 + 1 = 38.5 µs
        self.assertIn("3 decode steps of 9 kernels (3 layers found); step span median 38.5 µs", report)
        self.assertIn("between steps 4.0 µs", report)
        self.assertIn("| `layer kernel 1: gemv_kernel<float>` | 132 × 256 | 3 | 6.00 | 1.00 | 15.0 | 39.0% |", report)
        self.assertIn("| `layer kernel 2: attention_kernel` | 132 × 256 | 3 | 3.00 | -0.50 | 10.5 | 27.3% |", report)
        self.assertIn("| `lm_head_kernel` | 132 × 256 | 1 | 10.00 | 0.00 | 10.0 | 26.0% |", report)
        self.assertNotIn("fill_synthetic", report)
        # the middle layer (2 of 3) of the middle step, from that step's first start: embed 2 µs, layer 1 8.5
        self.assertIn("Layer 2 of 3 in step", report)
        self.assertIn("| `gemv_kernel<float>` | 9.50 | 15.50 | 6.00 | 5.00 |", report)
        self.assertIn("| `attention_kernel` | 16.00 | 19.00 | 3.00 | 3.50 |", report)

    def test_each_decode_graph_gets_its_own_table(self):
        text, t = HEADER, 0
        for _ in range(2):  # the first mixer's steps, then a second mixer's with one kernel more a layer
            rows, t = step(t)
            text += "".join(rows)
        for _ in range(2):
            rows, end = step(t)
            rows.insert(3, row(t + 7500, t + 7600, 50, "mlstm_decode_kernel"))
            text += "".join(rows)
            t = end
        report = kernel_timeline.summarise(kernel_timeline.read_records(io.StringIO(text)))
        self.assertEqual(report.count("decode steps of"), 2)
        self.assertIn("2 decode steps of 9 kernels", report)
        self.assertIn("2 decode steps of 10 kernels", report)

    def test_an_ablation_run_is_refused_by_name(self):
        records = self.timeline(extra=row(10**7, 10**7 + 10, 9, "emptied_kernel"))
        with self.assertRaisesRegex(ValueError, "--ablate"):
            kernel_timeline.summarise(records)

    def test_labels_leave_out_bifocals_namespaces(self):
        text = HEADER + row(0, 10, 3, "gemv_kernel<float, bifocal::cuda::(anonymous namespace)::PlainInput<float>, 4>")
        self.assertEqual(kernel_timeline.read_records(io.StringIO(text))[0]["name"], "gemv_kernel<float, PlainInput<float>, 4>")

    def test_a_kernel_hidden_behind_another_adds_nothing(self):
        before, added = kernel_timeline.frontier_walk([
            {"start": 0, "end": 100, "name": "a"}, {"start": 10, "end": 60, "name": "b"},
            {"start": 70, "end": 130, "name": "c"}])
        self.assertEqual(sorted(added.values()), [0, 30, 100])
        self.assertEqual(sum(added.values()), 130)

    def test_layer_period_is_the_longest_repeating_run(self):
        names = ["embed"] + ["a", "b", "c"] * 4 + ["head", "step"]
        self.assertEqual(kernel_timeline.layer_period(names), (1, 3, 4))

    def test_no_step_kernel_is_refused_by_name(self):
        records = kernel_timeline.read_records(io.StringIO(HEADER + row(0, 10, 3, "gemv_kernel")))
        with self.assertRaisesRegex(ValueError, "advance_decode_step_kernel"):
            kernel_timeline.summarise(records)

    def test_a_csv_of_another_tool_is_refused(self):
        with self.assertRaisesRegex(ValueError, "not a kernel_timeline CSV"):
            kernel_timeline.read_records(io.StringIO('"ID","Kernel Name"\n1,x\n'))

    def test_a_missing_file_is_a_message_naming_it_not_a_traceback(self):
        tool_test_support.assert_missing_file_is_named(self, "kernel_timeline.py")


if __name__ == "__main__":
    unittest.main()
