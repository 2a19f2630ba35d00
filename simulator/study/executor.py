"""Where independent simulations run: in this process, a local process pool, or Dask.

`run_tasks(fn, tasks, executor)` applies a picklable, module-level `fn` to every task and
returns the results in task order, whichever executor ran them. Nothing here changes a
result: every task carries its own inputs and seed, and the simulator is deterministic
given them, so `serial`, `pool` and Dask give identical lists (only wall time differs).

Executors:
    * ``"serial"``: one after another in this process (debugging, single tasks).
    * ``"pool"`` (default): a local `concurrent.futures.ProcessPoolExecutor` with at most
      ``os.cpu_count()`` workers (and no more than there are tasks).
    * ``"local-dask"``: a throw-away `distributed.LocalCluster` bound to 127.0.0.1
      (worker processes by default; ``processes=False`` gives threads in this process).
    * any other string: the address of a running Dask scheduler
      (``tcp://10.0.0.5:8786``), used through `distributed.Client(address)`.
    * a `distributed.Client` object: used as is (not closed).

Dask workers must be able to import this package (same version) and unpickle the tasks;
tasks should therefore carry data, not open files. No home-made distribution layer: the
pool and Dask do the scheduling; this module only keeps order and reports progress (through
an `on_done` callback; the command line draws the bar).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any, TypeVar

from simulator.errors import ClustersimError, InputError

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: Called in the calling process each time a task finishes: (task index, result).
OnDone = Callable[[int, Any], None]

LOCAL_DASK = "local-dask"


class ExecutorError(ClustersimError):
    """The executor itself failed (Dask missing, scheduler unreachable)."""

    exit_code = 1


def default_workers(n_tasks: int, max_workers: int | None = None) -> int:
    """Workers of a local pool: at most os.cpu_count(), at most the number of tasks."""
    cap = max_workers or os.cpu_count() or 1
    return max(1, min(cap, n_tasks))


def describe(executor: Any, n_tasks: int | None = None, max_workers: int | None = None) -> str:
    """A short human label of an executor choice, for progress lines (with the number of
    tasks and the cap on workers, the pool as `run_tasks` makes it: one worker is this
    process)."""
    if executor in (None, "pool"):
        if n_tasks is not None and default_workers(n_tasks, max_workers) == 1:
            return "this process (one worker)"
        workers = default_workers(n_tasks, max_workers) if n_tasks is not None else os.cpu_count() or 1
        return f"a local process pool ({workers} workers)"
    if executor == "serial":
        return "this process (serial)"
    if executor == LOCAL_DASK:
        return "a local Dask cluster on 127.0.0.1"
    if isinstance(executor, str):
        return f"Dask at {executor}"
    return "a Dask client"


def run_tasks(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    executor: Any = "pool",
    *,
    max_workers: int | None = None,
    on_done: OnDone | None = None,
    processes: bool = True,
) -> list[R]:
    """Apply `fn` to every task; results in task order.

    Args:
        fn: a module-level (picklable) function of one task.
        tasks: picklable task objects.
        executor: "serial", "pool", "local-dask", a Dask scheduler address, or a
            `distributed.Client`.
        max_workers: cap on local workers (pool and local-dask); default os.cpu_count().
        on_done: called in this process as each task finishes (completion order).
        processes: for "local-dask", worker processes (True) or threads (False).

    Raises:
        ExecutorError: Dask is not installed or the scheduler cannot be reached.
        Whatever `fn` raises, re-raised here for the first failing task in task order.
    """
    tasks = list(tasks)
    if not tasks:
        return []
    if executor == "serial" or (executor in (None, "pool") and default_workers(len(tasks), max_workers) == 1):
        return _serial(fn, tasks, on_done)
    if executor in (None, "pool"):
        return _pool(fn, tasks, default_workers(len(tasks), max_workers), on_done)
    with dask_client(executor, max_workers=max_workers, processes=processes) as client:
        return _dask(client, fn, tasks, on_done)


def _serial(fn: Callable[[T], R], tasks: list[T], on_done: OnDone | None) -> list[R]:
    out: list[R] = []
    for i, t in enumerate(tasks):
        r = fn(t)
        out.append(r)
        if on_done:
            on_done(i, r)
    return out


def _pool(fn: Callable[[T], R], tasks: list[T], workers: int, on_done: OnDone | None) -> list[R]:
    with ProcessPoolExecutor(max_workers=workers, initializer=_worker_init) as pool:  # as `_pool_each`
        futures = {pool.submit(fn, t): i for i, t in enumerate(tasks)}
        return _collect(
            as_completed(futures), futures.__getitem__, lambda f: f.exception(), len(tasks), on_done
        )


def _collect(
    done: Iterable[Any],
    index_of: Callable[[Any], int],
    error_of: Callable[[Any], BaseException | None],
    n: int,
    on_done: OnDone | None,
) -> list[Any]:
    """Results in task order from futures given in completion order (process pool or Dask).

    `on_done` hears of each success as it arrives; once all are in, the error of the
    lowest-numbered failed task is raised.
    """
    results: list[Any] = [None] * n
    errors: dict[int, BaseException] = {}
    for fut in done:
        i = index_of(fut)
        exc = error_of(fut)
        if exc is not None:
            errors[i] = exc
            continue
        results[i] = fut.result()
        if on_done:
            on_done(i, results[i])
    if errors:
        raise errors[min(errors)]
    return results


def for_each_task(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    on_result: OnDone,
    executor: Any = "pool",
    *,
    max_workers: int | None = None,
) -> None:
    """Apply `fn` to every task and hand each result to `on_result` as it finishes; keep none.

    Unlike `run_tasks`, nothing is held once `on_result` returns, so a long study's memory
    does not grow with its tasks. Any exception in this process while tasks run (a signal
    turned into an exception, an error of `on_result`) cancels what has not started and
    stops the local workers at once (killed, not waited for); finished results have been
    handed over already.

    Raises:
        Whatever `fn` raises, for the first failing task in task order, once the others
        are done.
    """
    tasks = list(tasks)
    if not tasks:
        return
    if executor == "serial" or (executor in (None, "pool") and default_workers(len(tasks), max_workers) == 1):
        _serial(fn, tasks, on_result)
        return
    if executor in (None, "pool"):
        _pool_each(fn, tasks, default_workers(len(tasks), max_workers), on_result)
        return
    with dask_client(executor, max_workers=max_workers) as client:
        futures = client.map(fn, tasks, pure=False)
        try:
            _dask_each(futures, on_result)
        except BaseException:
            client.cancel(futures)
            raise


def _worker_init() -> None:
    """Pool workers leave Ctrl-C to the parent, which stops them (no traceback per worker),
    die of SIGTERM (not the parent's handler, which they inherit), and exit by themselves
    if the parent dies without stopping them (SIGKILL): they would otherwise wait forever
    for tasks, and nobody would collect what they finish."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()


def _exit_when_orphaned(parent_pid: int, poll_s: float = 1.0) -> None:
    """Exit the process as soon as its parent is no longer `parent_pid` (it died)."""
    while os.getppid() == parent_pid:
        time.sleep(poll_s)
    os._exit(1)


def _pool_each(fn: Callable[[T], R], tasks: list[T], workers: int, on_result: OnDone) -> None:
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init)
    try:
        futures = {pool.submit(fn, t): i for i, t in enumerate(tasks)}
        # popped as they finish: a finished future holds its result (a run's frames)
        _collect_each(as_completed(futures), futures.pop, lambda f: f.exception(), on_result)
    except BaseException:
        processes = list((getattr(pool, "_processes", None) or {}).values())
        results = getattr(pool, "_result_queue", None)
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            proc.kill()
        for proc in processes:
            proc.join(timeout=5)
        _unblock_result_reader(results)
        raise
    pool.shutdown(wait=True)


def _unblock_result_reader(results: Any) -> None:
    """Close this process's write end of a killed pool's result pipe.

    A worker killed while it sent a result leaves the pool's manager thread waiting for the
    rest of that message; this process holds the pipe's write end too, so the wait never
    ends, and the interpreter waits for that thread at exit: the command hung after its
    'interrupted' line. With every write end closed the read ends (EOF) and the thread stops.
    """
    writer = getattr(results, "_writer", None)
    if writer is not None:
        writer.close()


def _dask_each(futures: list[Any], on_result: OnDone) -> None:
    from distributed import as_completed as dask_completed

    index = {f.key: i for i, f in enumerate(futures)}
    _collect_each(
        dask_completed(futures),
        lambda f: index[f.key],
        lambda f: f.exception() if f.status == "error" else None,
        on_result,
    )


def _collect_each(
    done: Iterable[Any],
    index_of: Callable[[Any], int],
    error_of: Callable[[Any], BaseException | None],
    on_result: OnDone,
) -> None:
    """Hand each finished future's result over; raise the lowest-numbered failure at the end."""
    errors: dict[int, BaseException] = {}
    for fut in done:
        i = index_of(fut)
        exc = error_of(fut)
        if exc is not None:
            errors[i] = exc
            continue
        on_result(i, fut.result())
    if errors:
        raise errors[min(errors)]


@contextmanager
def dask_client(executor: Any, max_workers: int | None = None, processes: bool = True) -> Iterator[Any]:
    """A `distributed.Client` for an executor choice; closed on exit unless passed in."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - depends on the environment
        raise ExecutorError(
            "Dask is not installed; install clustersim[dask] (dask[distributed]) or use the local pool"
        ) from None
    if not isinstance(executor, str):
        yield executor
        return
    if executor == LOCAL_DASK:
        workers = default_workers(os.cpu_count() or 1, max_workers)
        with (
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=processes,
                protocol="tcp",  # threads default to the in-process transport, which ignores host
                host="127.0.0.1",
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
        return
    try:
        client = Client(executor, timeout="10s")
    except ValueError as exc:  # not an address at all: a bad option value
        raise InputError(f"--dask {executor!r} is not a scheduler address ({exc})") from None
    except (OSError, TimeoutError) as exc:
        raise ExecutorError(f"cannot reach the Dask scheduler at {executor!r}: {exc}") from None
    try:
        yield client
    finally:
        client.close()


def _dask(client: Any, fn: Callable[[T], R], tasks: list[T], on_done: OnDone | None) -> list[R]:
    from distributed import as_completed as dask_completed

    futures = client.map(fn, tasks, pure=False)
    index = {f.key: i for i, f in enumerate(futures)}
    return _collect(
        dask_completed(futures),
        lambda f: index[f.key],
        lambda f: f.exception() if f.status == "error" else None,
        len(tasks),
        on_done,
    )
