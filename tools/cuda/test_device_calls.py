"""The device-call scripts refuse, before they spend any device time, a call whose files are not
all there: trial_on_device.sh without main's bundle, a trial's (of one or several named) or the
shared libraries, or with a trial name it cannot use; main_on_device.sh without its bundle or the
libraries; and run_on_device.sh without the libraries beside a bundle that holds none. Each names
the missing file and exits 2 (stop 77's third call ran every step without libs.tar.xz and spent
150 s of device time on failures). pack_trial.sh refuses the same trial names, by the same rule
(trial_name.sh), before it builds."""
import os
import subprocess
import tarfile
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(script, args, env=None):
    return subprocess.run(["bash", os.path.join(HERE, script)] + args, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


class DeviceCallRefusalsTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.gpu = self.directory.name

    def tearDown(self):
        self.directory.cleanup()

    def touch(self, name):
        path = os.path.join(self.gpu, name)
        open(path, "w").close()
        return path

    def test_trial_names_each_missing_file(self):
        env = {"GPU_DIR": self.gpu, "OUT": os.path.join(self.gpu, "out")}
        for present, missing in [([], "main.tar.xz"), (["main.tar.xz"], "t.tar.xz"),
                                 (["main.tar.xz", "t.tar.xz"], "libs.tar.xz")]:
            for name in present:
                self.touch(name)
            result = run("trial_on_device.sh", ["t"], env)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn(os.path.join(self.gpu, missing) + " is missing", result.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.gpu, "out", "gpu.txt")), "it began the call")

    def test_trial_of_several_names_names_a_missing_later_one(self):
        env = {"GPU_DIR": self.gpu, "OUT": os.path.join(self.gpu, "out")}
        for name in ["main.tar.xz", "a.tar.xz", "libs.tar.xz"]:
            self.touch(name)
        result = run("trial_on_device.sh", ["a", "b"], env)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn(os.path.join(self.gpu, "b.tar.xz") + " is missing", result.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.gpu, "out", "gpu.txt")), "it began the call")

    def test_trial_refuses_main_and_dotted_names(self):
        env = {"GPU_DIR": self.gpu, "OUT": os.path.join(self.gpu, "out")}
        for names in [["main"], ["a", "b.c"], []]:
            result = run("trial_on_device.sh", names, env)
            self.assertEqual(result.returncode, 2, names)
            self.assertIn("NAME" if names else "usage", result.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.gpu, "out", "gpu.txt")), "it began the call")

    def test_pack_trial_refuses_the_names_trial_on_device_refuses(self):
        patch = self.touch("p.patch")
        for name in ["main", "b.c"]:
            result = run("pack_trial.sh", [patch, name, os.path.join(self.gpu, "build")])
            self.assertEqual(result.returncode, 2, name)
            self.assertIn("pack_trial: NAME '%s'" % name, result.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.gpu, "build")), "it began the build")

    def test_main_names_the_bundle_then_the_libraries(self):
        bundle = os.path.join(self.gpu, "main-tests.tar.xz")
        result = run("main_on_device.sh", [bundle])
        self.assertEqual(result.returncode, 2)
        self.assertIn(bundle + " is missing", result.stderr)
        self.touch("main-tests.tar.xz")
        result = run("main_on_device.sh", [bundle])
        self.assertEqual(result.returncode, 2)
        self.assertIn(os.path.join(self.gpu, "libs.tar.xz") + " is missing", result.stderr)

    def test_run_names_the_libraries_a_bundle_lacks(self):
        bundle = os.path.join(self.gpu, "b.tar.xz")
        binary = self.touch("bifocal")
        with tarfile.open(bundle, "w:xz") as archive:
            archive.add(binary, arcname="bin/bifocal")
        result = run("run_on_device.sh", ["echo ran"], {"BUNDLE": bundle})
        self.assertEqual(result.returncode, 2)
        self.assertIn(os.path.join(self.gpu, "libs.tar.xz") + " is missing", result.stderr)
        self.assertNotIn("ran", result.stdout)


if __name__ == "__main__":
    unittest.main()
