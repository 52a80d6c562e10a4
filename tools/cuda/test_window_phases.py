"""window_phases.py on hand-made stamps whose phase lengths are known."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import window_phases  # noqa: E402


def line(block, stamps):
    return "window-phases " + " ".join(str(x) for x in [block] + stamps) + "\n"


class WindowPhasesTest(unittest.TestCase):
    def test_phase_lengths_and_when_the_blocks_finished_them(self):
        # block 0: waits until 1,000 ns, then phases of 500 ns; block 1 returns 2 µs later, phases of 1 µs
        lines = ["bench output\n", line(0, [0, 1000, 1500, 2000, 2500, 3000, 3500, 4000]),
                 line(1, [200, 3000, 4000, 5000, 6000, 7000, 8000, 9000])]
        report = window_phases.summarise(window_phases.read_stamps(lines))
        self.assertIn("2 blocks;", report)
        self.assertIn("| wait returned | 1.90 | 2.80 | 0.00 | 2.00 |", report)
        self.assertIn("| q normed and rotated | 0.75 | 1.00 | 0.50 | 3.00 |", report)
        self.assertIn("| end | 0.75 | 1.00 | 3.00 | 8.00 |", report)
        self.assertIn("Blocks started from -1.00 to -0.80 µs", report)
        self.assertIn("1 of 2 blocks returned from the wait more than one timer tick after the first (up to 2.00 µs); "
                      "they started from -0.80 to -0.80 µs and took 2.80 µs (median; max 2.80)", report)

    def test_the_sm_clock_from_the_cycles_field(self):
        # 4,000 ns from first to last stamp: 7,920 cycles is 1,980 MHz, 4,000 cycles 1,000 MHz
        lines = [line(0, [0, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 7920]),
                 line(1, [0, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4000]),
                 line(2, [0, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 6000])]
        report = window_phases.summarise(window_phases.read_stamps(lines))
        self.assertIn("SM clock over the blocks' lifetimes: median 1500 MHz (min 1000, max 1980).", report)
        old = window_phases.summarise(window_phases.read_stamps([line(0, [0, 1000] + [2000] * 6)]))
        self.assertNotIn("SM clock", old)  # a log from before the cycles field

    def test_blocks_within_one_timer_tick_of_the_first_return_are_not_late(self):
        lines = [line(0, [0, 1000] + [2000] * 6), line(1, [100, 1256] + [2000] * 6)]
        report = window_phases.summarise(window_phases.read_stamps(lines))
        self.assertNotIn("returned from the wait more than", report)

    def test_no_stamps_is_refused_with_the_build_flag_named(self):
        with self.assertRaisesRegex(ValueError, "BIFOCAL_WINDOW_ATTENTION_PHASES"):
            window_phases.read_stamps(["no stamps here\n"])

    def test_a_short_line_and_a_block_twice_are_refused(self):
        with self.assertRaisesRegex(ValueError, "fields"):
            window_phases.read_stamps(["window-phases 0 1 2 3\n"])
        with self.assertRaisesRegex(ValueError, "fields"):
            window_phases.read_stamps([line(0, list(range(10)))])
        with self.assertRaisesRegex(ValueError, "twice"):
            window_phases.read_stamps([line(3, list(range(8))), line(3, list(range(8)))])

    def test_a_missing_file_is_a_message_naming_it_not_a_traceback(self):
        missing = os.path.join(os.path.dirname(__file__), "no-such-file.csv")
        run = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "window_phases.py"), missing],
                             capture_output=True, text=True)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn(missing, run.stderr)
        self.assertNotIn("Traceback", run.stderr)


if __name__ == "__main__":
    unittest.main()
