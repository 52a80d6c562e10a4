"""Tests of kernel_times.py (python3 -m unittest tools/cuda/test_kernel_times.py): ncu's raw CSV layout,
units, kernel names and the per-step table."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import kernel_times  # noqa: E402

CSV = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Kernel Name","gpu__time_duration.sum"
"","","","","usecond"
"0","123","bifocal","void bifocal::cuda::(anonymous namespace)::fill_uniform_kernel<float>(float *, long, unsigned long, float)","50.00"
"1","123","bifocal","void bifocal::cuda::(anonymous namespace)::gemv_kernel<__nv_bfloat16, float, 4>(const __nv_bfloat16 *, const float *, int)","10.00"
"2","123","bifocal","void bifocal::cuda::(anonymous namespace)::gemv_kernel<__nv_bfloat16, float, 4>(const __nv_bfloat16 *, const float *, int)","14.00"
"3","123","bifocal","bifocal::cuda::advance_decode_step_kernel(const int *, int *, long *)","1.00"
"4","123","bifocal","void bifocal::cuda::(anonymous namespace)::gemv_kernel<__nv_bfloat16, float, 4>(const __nv_bfloat16 *, const float *, int)","12.00"
"5","123","bifocal","void bifocal::cuda::(anonymous namespace)::gemv_kernel<__nv_bfloat16, float, 4>(const __nv_bfloat16 *, const float *, int)","12.00"
"6","123","bifocal","bifocal::cuda::advance_decode_step_kernel(const int *, int *, long *)","1,000.00"
'''


class KernelTimes(unittest.TestCase):
    def test_names_keep_template_arguments_and_drop_namespaces_and_parameters(self):
        self.assertEqual(kernel_times.short_name(
            "void bifocal::cuda::(anonymous namespace)::gemv_kernel<float, 4>(const float *, int)"), "gemv_kernel<float, 4>")
        self.assertEqual(kernel_times.short_name("a::b::k<c::d<int>, 2>(x::y)"), "k<c::d<int>, 2>")

    def test_units_row_and_thousands_separators(self):
        times = kernel_times.read_times(CSV.splitlines(keepends=True))
        self.assertEqual(len(times), 7)
        self.assertEqual(times[1], ("gemv_kernel<__nv_bfloat16, float, 4>", 10.0))
        self.assertEqual(times[6][1], 1000.0)
        nanoseconds = CSV.replace('"usecond"', '"nsecond"')
        self.assertAlmostEqual(kernel_times.read_times(nanoseconds.splitlines(keepends=True))[1][1], 0.01)

    def test_per_step_table_leaves_out_the_synthetic_fill(self):
        table = kernel_times.summarise(kernel_times.read_times(CSV.splitlines(keepends=True)))
        self.assertIn("2 decode steps", table)
        # gemv: 4 launches over 2 steps, 48 µs in all: 2 a step, 12 µs a launch, 24 µs a step.
        self.assertIn("| `gemv_kernel<__nv_bfloat16, float, 4>` | 2.0 | 12.00 | 24.0 |", table)
        self.assertNotIn("fill_uniform", table)
        self.assertIn("per step 524.5 µs", table)  # (48 + 1001) / 2

    def test_the_profiled_programs_own_output_before_the_header_is_skipped(self):
        # As on the H200: bench's Markdown report (with | and , in it) shares ncu's stdout, and ncu's
        # raw page writes the anonymous namespace as "unnamed>::".
        report = ('# bifocal bench: qwen3-4b (bf16)\n', '| mixer | context | decode tok/s |\n', '| `swa` | 1K | 0.3 |\n')
        real = CSV.replace("bifocal::cuda::(anonymous namespace)::", "unnamed>::")
        lines = [real.splitlines(keepends=True)[0], *report, *real.splitlines(keepends=True)[1:]]
        times = kernel_times.read_times(lines)
        self.assertEqual(len(times), 7)
        self.assertEqual(times[1], ("gemv_kernel<__nv_bfloat16, float, 4>", 10.0))
        self.assertIn("2 decode steps", kernel_times.summarise(times))

    def test_errors_name_what_is_missing(self):
        with self.assertRaisesRegex(ValueError, "Kernel Name"):
            kernel_times.read_times(['"ID","Other"\n', '"0","x"\n'])
        with self.assertRaisesRegex(ValueError, "no ncu CSV header"):
            kernel_times.read_times(['bifocal: decode 0.3 tok/s\n'])
        with self.assertRaisesRegex(ValueError, "not a decode run"):
            kernel_times.summarise([("gemv_kernel", 1.0)])

    def test_prefill_table_is_per_thousand_prompt_tokens(self):
        times = kernel_times.read_times(CSV.splitlines(keepends=True))
        table = kernel_times.summarise_prefill(times, 2000)
        # gemv: 4 launches, 48 µs over 2,000 tokens: 24 µs per 1,000; all kernels but the fill 1,049 µs.
        self.assertIn("| `gemv_kernel<__nv_bfloat16, float, 4>` | 4 | 12.00 | 24.0 |", table)
        self.assertIn("524.5 µs per 1,000 tokens", table)
        self.assertNotIn("fill_uniform", table)
        with self.assertRaisesRegex(ValueError, "must be positive"):
            kernel_times.summarise_prefill(times, 0)


if __name__ == "__main__":
    unittest.main()
