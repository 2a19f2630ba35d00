"""`simulator.study.executor.run_tasks`: task order, identical results, errors, progress."""

from __future__ import annotations

import pytest

from simulator.study.executor import default_workers, run_tasks


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
