"""phase_stamps.py on hand-made stamps whose phase lengths are known."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import phase_stamps  # noqa: E402
import tool_test_support  # noqa: E402


def line(block, stamps):
    return "window-phases " + " ".join(str(x) for x in [block] + stamps) + "\n"


class WindowPhasesTest(unittest.TestCase):
    def test_phase_lengths_and_when_the_blocks_finished_them(self):
        # block 0: waits until 1,000 ns, then phases of 500 ns; block 1 returns 2 µs later, phases of 1 µs
        lines = ["bench output\n", line(0, [0, 1000, 1500, 2000, 2500, 3000, 3500, 4000]),
                 line(1, [200, 3000, 4000, 5000, 6000, 7000, 8000, 9000])]
        report = phase_stamps.summarise(phase_stamps.read_stamps(lines))
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
        report = phase_stamps.summarise(phase_stamps.read_stamps(lines))
        self.assertIn("SM clock over the blocks' lifetimes: median 1500 MHz (min 1000, max 1980).", report)
        old = phase_stamps.summarise(phase_stamps.read_stamps([line(0, [0, 1000] + [2000] * 6)]))
        self.assertNotIn("SM clock", old)  # a log from before the cycles field

    def test_blocks_within_one_timer_tick_of_the_first_return_are_not_late(self):
        lines = [line(0, [0, 1000] + [2000] * 6), line(1, [100, 1256] + [2000] * 6)]
        report = phase_stamps.summarise(phase_stamps.read_stamps(lines))
        self.assertNotIn("returned from the wait more than", report)

    def test_no_stamps_is_refused_with_the_build_flag_named(self):
        with self.assertRaisesRegex(ValueError, "BIFOCAL_WINDOW_ATTENTION_PHASES"):
            phase_stamps.read_stamps(["no stamps here\n"])

    def test_a_short_line_and_a_block_twice_are_refused(self):
        with self.assertRaisesRegex(ValueError, "fields"):
            phase_stamps.read_stamps(["window-phases 0 1 2 3\n"])
        with self.assertRaisesRegex(ValueError, "fields"):
            phase_stamps.read_stamps([line(0, list(range(10)))])
        with self.assertRaisesRegex(ValueError, "twice"):
            phase_stamps.read_stamps([line(3, list(range(8))), line(3, list(range(8)))])

    def test_a_missing_file_is_a_message_naming_it_not_a_traceback(self):
        tool_test_support.assert_missing_file_is_named(self, "phase_stamps.py")


class DenominatorPhasesTest(unittest.TestCase):
    """--kernel denominators: the mLSTM prefill's kernel 3, its own tag and point names."""

    @staticmethod
    def line(block, stamps):
        return "denominator-phases " + " ".join(str(x) for x in [block] + stamps) + "\n"

    def test_its_lines_alone_are_read_and_named_by_its_points(self):
        # block 0 (state 0, chunk 0) and block 1: phases of 1 µs and 2 µs after a wait to 1,000 ns;
        # a window-phases line in the same log is not this kernel's
        lines = [self.line(0, [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 14000]),
                 "window-phases 0 0 1 2 3 4 5 6 7 8\n",
                 self.line(1, [0, 1000, 3000, 5000, 7000, 9000, 11000, 13000, 24000])]
        blocks = phase_stamps.read_stamps(lines, "denominators")
        self.assertEqual(sorted(blocks), [0, 1])
        report = phase_stamps.summarise(blocks, "denominators")
        self.assertIn("| products N and q̂·N | 1.50 | 2.00 | 4.00 | 8.00 |", report)
        self.assertIn("| counted done | 1.50 | 2.00 | 6.00 | 12.00 |", report)
        self.assertNotIn("q normed", report)

    def test_no_stamps_names_its_own_build_flag(self):
        with self.assertRaisesRegex(ValueError, "BIFOCAL_MLSTM_DENOMINATOR_PHASES"):
            phase_stamps.read_stamps(["window-phases 0 0 1 2 3 4 5 6 7\n"], "denominators")

    def test_the_kernel_is_chosen_on_the_command_line_and_a_wrong_one_refused(self):
        script = os.path.join(os.path.dirname(__file__), "phase_stamps.py")
        log = self.line(0, [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 14000])
        run = subprocess.run([sys.executable, script, "--kernel", "denominators"], input=log, capture_output=True,
                             text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("| weights W and e | 1.00 |", run.stdout)
        wrong = subprocess.run([sys.executable, script, "--kernel", "outputs"], input=log, capture_output=True,
                               text=True)
        self.assertNotEqual(wrong.returncode, 0)
        self.assertIn("usage", wrong.stderr)


class AttentionPhasesTest(unittest.TestCase):
    """--kernel attention: the prefill attention's epilogue, its clock from the first block's start, and the
    denominators' stamps of the same log placed on that clock."""

    @staticmethod
    def line(block, stamps):
        return "attention-phases " + " ".join(str(x) for x in [block] + stamps) + "\n"

    # block 0 starts at 1,000 ns, block 1 at 3,000; S and the wait for the denominators (chunk landed →
    # awaited) take block 0 4 µs and block 1 none
    BLOCKS = [line.__func__(0, [1000, 2000, 10000, 11000, 12000, 16000, 17000, 18000]),
              line.__func__(1, [3000, 4000, 12000, 13000, 14000, 14000, 15000, 16000])]

    def test_the_clock_starts_at_the_first_block_and_no_block_is_late(self):
        report = phase_stamps.summarise(phase_stamps.read_stamps(self.BLOCKS, "attention"), "attention")
        self.assertIn("µs, 0 = the first block's start", report)
        self.assertIn("| key tiles done | 8.00 | 8.00 | 9.00 | 11.00 |", report)
        self.assertIn("| S made, denominators awaited | 2.00 | 4.00 | 13.00 | 15.00 |", report)
        self.assertIn("Blocks started from 0.00 to 2.00 µs", report)
        self.assertNotIn("returned from the wait", report)

    def test_the_denominators_of_the_same_log_on_its_clock(self):
        # counted done at 13,000 and 12,000 ns: 12 and 11 µs on the attention's clock
        denominators = ["denominator-phases 0 0 500 1000 2000 3000 4000 5000 13000 9000\n",
                        "denominator-phases 1 0 500 1000 2000 3000 4000 5000 12000 9000\n"]
        lines = self.BLOCKS + denominators
        blocks = phase_stamps.read_stamps(lines, "attention")
        beside = phase_stamps.denominators_beside(blocks, lines)
        self.assertIn("2 blocks, the same layer, this clock): started -1.00 to -1.00 µs, counted done 11.00 to 12.00",
                      beside)
        self.assertIn("passed their wait for them from 13.00 to 15.00 µs, S and the wait taking 2.00 µs (median; "
                      "max 4.00); 1 of 2 took more than a timer tick.", beside)
        self.assertEqual(phase_stamps.denominators_beside(blocks, self.BLOCKS), "")  # none in the log

    def test_no_stamps_names_its_own_build_flag(self):
        with self.assertRaisesRegex(ValueError, "BIFOCAL_PREFILL_ATTENTION_PHASES"):
            phase_stamps.read_stamps(["denominator-phases 0 0 1 2 3 4 5 6 7\n"], "attention")


if __name__ == "__main__":
    unittest.main()
