"""What the tools' tests in tools/cuda share."""
import os
import subprocess
import sys


def assert_missing_file_is_named(test, script):
    """`script` (a tool beside this file) given a file that does not exist exits non-zero with a
    message naming the file, not a traceback."""
    here = os.path.dirname(__file__)
    missing = os.path.join(here, "no-such-file.csv")
    run = subprocess.run([sys.executable, os.path.join(here, script), missing], capture_output=True, text=True)
    test.assertNotEqual(run.returncode, 0)
    test.assertIn(missing, run.stderr)
    test.assertNotIn("Traceback", run.stderr)
