"""`simulator.study.executor.run_tasks`: task order, identical results, errors, progress."""

from __future__ import annotations

import pytest

from simulator.study.executor import default_workers, describe, run_tasks


def square_after(task: tuple[int, float]) -> int:
    """Sleeps so that later tasks may finish first; returns the task's square."""
    import time

    i, delay = task
    time.sleep(delay)
    return i * i


def fail_on_three(i: int) -> int:
    if i == 3:
        raise ValueError("three")
    return i


TASKS = [(i, 0.05 * ((7 - i) % 4)) for i in range(8)]


@pytest.mark.parametrize("executor", ["serial", "pool"])
def test_results_keep_task_order(executor: str) -> None:
    done: list[int] = []
    out = run_tasks(square_after, TASKS, executor, on_done=lambda i, r: done.append(i))
    assert out == [i * i for i in range(8)]
    assert sorted(done) == list(range(8))


def test_local_dask_cluster_on_loopback_gives_the_same_list() -> None:
    out = run_tasks(square_after, TASKS, "local-dask", max_workers=2, processes=False)
    assert out == [i * i for i in range(8)]


def test_errors_propagate_from_pool_and_serial() -> None:
    for executor in ("serial", "pool"):
        with pytest.raises(ValueError, match="three"):
            run_tasks(fail_on_three, range(6), executor)


def test_empty_and_worker_cap() -> None:
    assert run_tasks(square_after, [], "pool") == []
    assert default_workers(3, 64) == 3
    assert default_workers(100, 2) == 2
    assert default_workers(0) == 1


def _record_pid_and_sleep(folder: str) -> int:
    import os
    import time
    from pathlib import Path

    (Path(folder) / str(os.getpid())).write_text("")
    time.sleep(60)
    return 0


def test_an_interrupt_kills_the_pool_workers_and_keeps_what_finished(tmp_path) -> None:
    """SIGINT (turned into `Interrupted`) while two 60 s tasks run: the workers are killed at
    once instead of being waited for, and the results handed over before stay handed over."""
    import os
    import signal
    import threading

    from simulator.io import Interrupted, stop_signals_raise
    from simulator.study.executor import for_each_task

    got: list[int] = []

    def interrupt_when_both_started() -> None:
        while len(list(tmp_path.iterdir())) < 2:
            threading.Event().wait(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_both_started, daemon=True).start()
    with pytest.raises(Interrupted), stop_signals_raise():
        for_each_task(
            _record_pid_and_sleep, [str(tmp_path)] * 2, lambda i, r: got.append(i), "pool", max_workers=2
        )
    assert got == []
    for pid in (int(p.name) for p in tmp_path.iterdir()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_for_each_task_hands_every_result_over_in_completion_order() -> None:
    from simulator.study.executor import for_each_task

    got: dict[int, int] = {}
    for_each_task(square_after, TASKS, got.__setitem__, "pool", max_workers=2)
    assert got == {i: square_after(t) for i, t in enumerate(TASKS)}
    with pytest.raises(ValueError):
        for_each_task(fail_on_three, range(6), lambda i, r: None, "serial")


_ORPHAN_SCRIPT = """
import os, signal, sys, threading, time
from pathlib import Path
from simulator.study.executor import for_each_task

folder = Path(sys.argv[1])

def record_and_sleep(where):
    (Path(where) / str(os.getpid())).touch()
    time.sleep(60)

def kill_parent_when_both_started():
    while len(list(folder.iterdir())) < 2:
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)

threading.Thread(target=kill_parent_when_both_started, daemon=True).start()
for_each_task(record_and_sleep, [str(folder)] * 2, lambda i, r: None, "pool", max_workers=2)
"""


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting to be reaped has exited)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_pool_workers_exit_when_the_parent_is_killed(tmp_path) -> None:
    """SIGKILL cannot be caught, so the parent cannot stop its workers: they notice it died
    (within a second) and exit instead of waiting for tasks forever."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    res = subprocess.run([sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp_path)], env=env, timeout=60)
    assert res.returncode == -9
    pids = [int(p.name) for p in tmp_path.iterdir()]
    assert len(pids) == 2
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def test_describe_names_the_executor_the_tasks_will_run_on() -> None:
    """The progress line says what `run_tasks` / `for_each_task` will do: one worker is this
    process, not a pool."""
    assert describe("pool", n_tasks=3, max_workers=1) == "this process (one worker)"
    assert describe("pool", n_tasks=1) == "this process (one worker)"
    assert describe("pool", n_tasks=5, max_workers=2) == "a local process pool (2 workers)"
    assert describe("serial", n_tasks=5) == "this process (serial)"


def sigint_handler(_: int) -> str:
    import signal

    return str(signal.getsignal(signal.SIGINT))


def test_pool_workers_of_run_tasks_leave_ctrl_c_to_the_parent_and_watch_for_it() -> None:
    """The workers of `run_tasks` (a study's step-time phase) start as `for_each_task`'s do:
    SIGINT ignored, and a thread that ends them once the parent is gone (a parent killed
    with SIGKILL left them idle for good)."""
    import signal

    assert run_tasks(sigint_handler, [0, 1], "pool", max_workers=2) == [str(signal.SIG_IGN)] * 2


def _half_a_result_then_sleep(task: tuple[str, int]) -> int:
    """Task 0 returns at once; task 1, once task 0's result is in, writes the first bytes of
    a result into the pool's result pipe, as a worker killed mid-send leaves it, and sleeps."""
    import os
    import struct
    import sys
    import time
    from pathlib import Path

    folder, index = task
    if index == 1:
        while not (Path(folder) / "go").exists():
            time.sleep(0.02)
        frame = sys._getframe()
        while "result_queue" not in frame.f_locals:  # up to concurrent.futures' worker loop
            frame = frame.f_back  # type: ignore[assignment]
        fd = frame.f_locals["result_queue"]._writer.fileno()
        os.write(fd, struct.pack("!i", 1_000_000) + b"half a result")
        (Path(folder) / "written").touch()
        time.sleep(60)
    return index


def test_an_interrupt_while_a_result_is_half_sent_lets_the_pool_thread_end(tmp_path) -> None:
    """A worker killed in the middle of sending a result left the pool's manager thread
    reading the rest forever, and the process hung at exit after 'interrupted'."""
    import concurrent.futures.process as cf_process
    import time

    from simulator.study.executor import for_each_task

    def interrupt_once_half_sent(i: int, r: int) -> None:
        (tmp_path / "go").touch()
        while not (tmp_path / "written").exists():
            time.sleep(0.02)
        time.sleep(0.2)  # the manager thread is reading the half-sent result by now
        raise KeyboardInterrupt

    before = set(cf_process._threads_wakeups)
    with pytest.raises(KeyboardInterrupt):
        for_each_task(
            _half_a_result_then_sleep,
            [(str(tmp_path), 0), (str(tmp_path), 1)],
            interrupt_once_half_sent,
            "pool",
            max_workers=2,
        )
    for thread in set(cf_process._threads_wakeups) - before:
        thread.join(timeout=30)  # a guard against a hang, not a measurement
        stuck = thread.is_alive()
        if stuck:  # let this test process end all the same
            thread.result_queue._writer.close()  # type: ignore[attr-defined]
        assert not stuck
