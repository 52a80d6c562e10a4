"""Tests of kernel_lines.py (python3 -m unittest tools/cuda/test_kernel_lines.py): the layout of
ncu's source page with CUDA lines and their SASS, and the per-line table."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import kernel_lines  # noqa: E402

# The shape of `ncu -i R --page source --csv --print-source cuda,sass` (columns cut to those read
# and a neighbour): per file, a header row, then each CUDA line ("-" for its address) followed by
# its SASS instructions (no line number).
PAGE = '''"File Path","/src/kernel.cu"
"Function Name","k(int)"
"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","# Samples","Instructions Executed"
"10","  x = a * b;","-","-","30","30","1,200"
"","","0x7f00","      FMUL R1, R2, R3","30","30","1,200"
"11","  y = x + 1;","-","-","10","10","400"
"File Path","/src/helper.cuh"
"Function Name","k(int)"
"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","# Samples","Instructions Executed"
"5","  return p[i];","-","-","60","60","2,400"
"File Path","/src/helper.cuh"
"Function Name","other(int)"
"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","# Samples","Instructions Executed"
"5","  return p[i];","-","-","0","0","100"
'''


class KernelLines(unittest.TestCase):
    def test_lines_are_summed_per_file_and_line_and_sass_rows_skipped(self):
        import csv
        totals = kernel_lines.line_totals(csv.reader(io.StringIO(PAGE)))
        self.assertEqual(totals, {("kernel.cu", 10): (30, 1200, "x = a * b;"), ("kernel.cu", 11): (10, 400, "y = x + 1;"),
                                  ("helper.cuh", 5): (60, 2500, "return p[i];")})

    def test_table_puts_the_most_sampled_line_first_with_its_shares(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(PAGE)
        sys.argv = ["kernel_lines.py", f.name, "2"]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            kernel_lines.main()
        os.unlink(f.name)
        rows = [line for line in printed.getvalue().splitlines() if line.startswith("| ") and "%" in line]
        self.assertEqual(rows, ["| 60.0% | 61.0% | helper.cuh:5 | `return p[i];` |",
                                "| 30.0% | 29.3% | kernel.cu:10 | `x = a * b;` |"])

    def test_a_page_without_line_rows_is_an_error_naming_the_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write('"Address","Source"\n"0x1","FMUL"\n')
        sys.argv = ["kernel_lines.py", f.name]
        with self.assertRaises(SystemExit) as raised:
            kernel_lines.main()
        os.unlink(f.name)
        self.assertIn(f.name, str(raised.exception))
        self.assertIn("-lineinfo", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
