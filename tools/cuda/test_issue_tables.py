"""issue_tables.sh with a stand-in for `bifocal` (no GPU): each table's bench runs with
docs/performance.md's arguments, its files land as NAME.{json,md,svg}, targets.md is written from the
decode tables, a table whose bench fails is named while the others still land, and a missing
binary is refused."""
import json
import os
import stat
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "issue_tables.sh")

# Records its arguments, one line a call, and writes bench files under --out; fails for the shape
# named in FAIL_SHAPE.
STAND_IN = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
out=""; shape=""
args=("$@")
for ((i = 0; i < ${#args[@]}; ++i)); do
  case ${args[i]} in --out) out=${args[i+1]};; --shape) shape=${args[i+1]};; esac
done
if [ "$shape" = "${FAIL_SHAPE:-}" ]; then echo "bench: cannot run $shape" >&2; exit 3; fi
mkdir -p "$out"
echo "{\\"model\\": \\"$shape\\", \\"rows\\": []}" > "$out/bench.json"
echo "# $shape" > "$out/bench.md"
echo "<svg/>" > "$out/bench.svg"
echo "progress: $shape" >&2
"""


class IssueTablesTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.root = self.directory.name
        self.bifocal = os.path.join(self.root, "bifocal")
        with open(self.bifocal, "w") as f:
            f.write(STAND_IN)
        os.chmod(self.bifocal, os.stat(self.bifocal).st_mode | stat.S_IEXEC)
        self.calls = os.path.join(self.root, "calls.txt")
        self.out = os.path.join(self.root, "tables")

    def tearDown(self):
        self.directory.cleanup()

    def run_tables(self, fail_shape="", bifocal=None):
        env = dict(os.environ, CALLS=self.calls, FAIL_SHAPE=fail_shape)
        return subprocess.run(["bash", SCRIPT, bifocal or self.bifocal, self.out], env=env,
                              capture_output=True, text=True, timeout=60)

    def test_every_table_lands_under_its_name_with_the_pages_arguments(self):
        result = self.run_tables()
        self.assertEqual(result.returncode, 0, result.stderr)
        names = ["qwen3-4b", "qwen3.5", "qwen3-4b-full", "paper-fig2", "qwen3-4b-prefill", "qwen3.5-prefill"]
        for name in names:
            for ext in ("json", "md", "svg"):
                self.assertTrue(os.path.isfile(os.path.join(self.out, f"{name}.{ext}")), f"{name}.{ext}")
            self.assertFalse(os.path.exists(os.path.join(self.out, f"{name}.run")))
        with open(os.path.join(self.out, "qwen3.5.json")) as f:
            self.assertEqual(json.load(f)["model"], "qwen3.5-4b-like")
        with open(self.calls) as f:
            calls = f.read().splitlines()
        self.assertEqual(len(calls), 6)
        self.assertIn("--shape qwen3-4b --mixer swa:window=576,sink=learned --mixer bifocal:window=448,state=kv "
                      "--context 1k,32k,128k,256k --gen 64 --repeat 3", calls[0])
        self.assertIn("--mixer bifocal:window=320,state=kv --context 1k,2k,4k,8k,16k,32k --gen 8", calls[5])
        self.assertIn("--shape paper-fig2 --dtype fp16", calls[3])
        with open(os.path.join(self.out, "targets.md")) as f:
            self.assertTrue(f.read().startswith("| target |"))
        with open(os.path.join(self.out, "progress.txt")) as f:
            self.assertIn("progress: paper-fig2", f.read())

    def test_a_failing_table_is_named_and_the_others_still_land(self):
        result = self.run_tables(fail_shape="qwen3.5-4b-like")
        self.assertEqual(result.returncode, 1)
        self.assertIn("qwen3.5 FAILED", result.stderr)
        self.assertIn("failed: qwen3.5 qwen3.5-prefill", result.stderr)
        self.assertTrue(os.path.isfile(os.path.join(self.out, "paper-fig2.json")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "qwen3.5.json")))
        self.assertTrue(os.path.isfile(os.path.join(self.out, "targets.md")))

    def test_a_missing_binary_is_refused_by_name(self):
        missing = os.path.join(self.root, "no-such-bifocal")
        result = self.run_tables(bifocal=missing)
        self.assertEqual(result.returncode, 2)
        self.assertIn(f"{missing} is not an executable bifocal", result.stderr)
        self.assertFalse(os.path.exists(self.calls))


if __name__ == "__main__":
    unittest.main()
