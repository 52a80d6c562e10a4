"""Every peer row in a fresh process, so that no row's failure reaches another.

A CUDA device-side assert (or a segfault in a compiled graph, or a hung compile) leaves the process
that hit it unusable: every later CUDA call fails. So peer_pytorch.py (the parent, which never
imports torch) starts this file once per row as `python3 peer_runner.py SPEC RESULT`: the worker
builds the model, measures the one row and writes the row as JSON before it exits. The parent
waits at most --timeout-per-row seconds, then kills the worker's process group (which also holds
inductor's compile workers); a row whose worker died, hung or failed is reported as skipped with
the reason, and the next row starts clean.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Callable, Optional

from peer_shapes import (PEER_EAGER, ModelShape, SyntheticConfig, context_label, full_attention, log, peer_label,
                         short_error, sliding_attention)

WORKER = os.path.abspath(__file__)
STOP_GRACE_SECONDS = 5.0


class WorkerUnavailable(Exception):
    """The first row's process could not measure at all (no torch, no transformers, no GPU)."""


def plan_rows(shapes: list[str], windows: list[int], peers: list[str], contexts: list[int], fill: str) -> list[dict]:
    """The rows to measure, in order: per shape, full attention then each window; per peer; per context."""
    rows = []
    for shape in shapes:
        for window in [None, *windows]:
            attention = full_attention() if window is None else sliding_attention(window)
            for peer in peers:
                for context in contexts:
                    rows.append({"shape": shape, "attention": attention, "window": window, "fill": fill,
                                 "peer": peer, "context": context, "notes": []})
    return rows


def row_label(row: dict) -> str:
    return f"{row['shape']} {peer_label(row['peer'], row['attention'])} at {context_label(row['context'])}"


def exit_description(code: Optional[int]) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a worker's process group (the worker is its leader: start_new_session)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class RowRunner:
    """Runs rows one at a time, each in its own worker process (see the module docstring)."""

    def __init__(self, settings, shapes: dict[str, ModelShape], synthetic: SyntheticConfig, timeout: float,
                 worker_command: Optional[list[str]] = None):
        self.settings = settings
        self.shapes = shapes
        self.synthetic = synthetic
        self.timeout = timeout
        self.worker_command = worker_command or [sys.executable, WORKER]

    def run(self, rows: list[dict], on_row: Callable[[list[dict], Optional[dict]], None]) -> list[dict]:
        """Every row; `on_row(rows so far, meta)` after each (meta: the worker's device and
        versions, None when it reported none)."""
        done: list[dict] = []
        fatal = None
        previous = signal.getsignal(signal.SIGTERM)
        in_main_thread = _in_main_thread()
        if in_main_thread:
            # Killed from outside (a time limit): end the worker first (run_one's finally).
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        try:
            for row in rows:
                if fatal:
                    done.append(dict(row, status="skipped", reason=f"not run: {fatal}"))
                    on_row(done, None)
                    continue
                log(f"{row_label(row)}: starting a process (at most {self.timeout:g} s)")
                row, meta, fatal = self.run_one(row)
                if fatal and not done:
                    raise WorkerUnavailable(fatal)
                if fatal:
                    row = dict(row, status="skipped", reason=f"not run: {fatal}")
                done.append(row)
                on_row(done, meta)
        finally:
            if in_main_thread:
                signal.signal(signal.SIGTERM, previous)
        return done

    def run_one(self, row: dict) -> tuple[dict, Optional[dict], Optional[str]]:
        """(the finished row, the worker's meta, a fatal reason or None)."""
        spec = {"settings": dataclasses.asdict(self.settings), "shape": dataclasses.asdict(self.shapes[row["shape"]]),
                "synthetic": dataclasses.asdict(self.synthetic), "row": row, "parent_pid": os.getpid()}
        with tempfile.TemporaryDirectory(prefix="peer-row-") as temp:
            spec_path, result_path = os.path.join(temp, "spec.json"), os.path.join(temp, "result.json")
            with open(spec_path, "w", encoding="utf-8") as f:
                json.dump(spec, f)
            started = time.monotonic()
            process = subprocess.Popen([*self.worker_command, spec_path, result_path], stdin=subprocess.DEVNULL,
                                       start_new_session=True)
            timed_out = False
            try:
                process.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                self.stop(process)
            wall_seconds = round(time.monotonic() - started, 1)
            result = None
            if os.path.exists(result_path):
                try:
                    with open(result_path, encoding="utf-8") as f:
                        result = json.load(f)
                except (OSError, ValueError) as error:
                    log(f"{row_label(row)}: unreadable result ({short_error(error)})")
        if result and result.get("fatal"):
            return row, None, result["fatal"]
        if result and "row" in result:
            finished = result["row"]
        elif timed_out:
            finished = dict(row, status="skipped",
                            reason=f"timed out after {self.timeout:g} s (--timeout-per-row); its process was killed")
        else:
            finished = dict(row, status="skipped", reason=f"its process ended with {exit_description(process.returncode)} "
                                                          "before reporting (see stderr)")
        if finished.get("status") != "ok":
            log(f"{row_label(row)}: skipped: {finished.get('reason', '')}")
        finished["wall_seconds"] = wall_seconds
        return finished, (result or {}).get("meta"), None

    def stop(self, process: subprocess.Popen) -> None:
        """End the worker if it still runs (SIGTERM, then SIGKILL), then whatever is left of its
        process group (inductor's compile workers)."""
        if process.poll() is None:
            kill_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                kill_group(process.pid, signal.SIGKILL)
                process.wait()
        kill_group(process.pid, signal.SIGKILL)


def _in_main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


# --------------------------------------------------------------------------------------------
# The worker: one row, in this process
# --------------------------------------------------------------------------------------------

def die_with_parent(parent_pid: int) -> None:
    """Linux: SIGKILL this worker when the parent dies, so a parent killed by a time limit leaves
    no worker holding the GPU."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent was already gone
        os._exit(1)


def write_result(path: str, result: dict) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)


def measure_row(measurer, shape: ModelShape, row: dict) -> dict:
    """The row measured, or skipped with its reason; never raises."""
    from peer_compiled import compiled_row
    from peer_models import RowSkipped
    torch = measurer.torch
    label = row_label(row)
    notes = list(row.pop("notes", []))
    try:
        started = time.monotonic()
        model = measurer.build_model(shape, row["window"])
        row["build_seconds"] = round(time.monotonic() - started, 1)
    except Exception as error:  # noqa: BLE001
        traceback.print_exc(file=sys.stderr)
        row.update(status="skipped", reason=f"model: {short_error(error)}", notes=notes)
        return row
    try:
        ok, description = measurer.attention_report(model, row["window"])
        row["attention_setup"] = description
        log(f"{label}: {description}")
        if not ok:
            raise RowSkipped(f"transformers does not attend as asked: {description}")
        log(f"{label}: measuring")
        torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            if row["peer"] == PEER_EAGER:
                result = measurer.eager_row(model, shape, row["context"])
            else:
                result = compiled_row(measurer, model, shape, row["context"], row["window"])
        notes += result.pop("notes", [])
        row.update(result, status="ok", peak_device_bytes=torch.cuda.max_memory_allocated())
        log(f"{label}: {row['decode_tokens_per_second']:.1f} tok/s ({1000.0 / row['decode_tokens_per_second']:.2f} "
            f"ms/token)" + (f", compiled in {row['compile_seconds']} s" if "compile_seconds" in row else ""))
    except RowSkipped as error:
        row.update(status="skipped", reason=str(error))
        if error.__cause__ is not None:
            traceback.print_exception(error.__cause__, file=sys.stderr)
    except torch.cuda.OutOfMemoryError as error:
        row.update(status="skipped", reason=f"out of memory ({short_error(error)[:120]})")
    except Exception as error:  # noqa: BLE001 -- the row's reason; this process ends after it
        row.update(status="skipped", reason=short_error(error))
        traceback.print_exc(file=sys.stderr)
    row["notes"] = notes
    return row


def worker_main(argv: list[str]) -> int:
    spec_path, result_path = argv
    os.dup2(2, 1)  # the parent's stdout is its Markdown; everything here is progress
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    die_with_parent(spec["parent_pid"])
    from peer_models import Measurer, Settings
    try:
        measurer = Measurer(Settings(**spec["settings"]), SyntheticConfig(**spec["synthetic"]))
        meta = measurer.meta()
    except (ImportError, RuntimeError) as error:
        write_result(result_path, {"fatal": short_error(error)})
        return 1
    row = measure_row(measurer, ModelShape(**spec["shape"]), spec["row"])
    write_result(result_path, {"row": row, "meta": meta})
    return 0


if __name__ == "__main__":
    code = worker_main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown: after a device-side assert it can hang or crash in CUDA
    # destructors, and the result is already written.
    os._exit(code)
