"""Files on disk: atomic files, and results folders replaced whole or not at all.

`write_atomic` writes one file through a temporary sibling and a rename, `write_files_atomic`
several, renamed in once all are written. `ResultsFolder`
guards a whole results folder: it checks up front that the folder can be written, holds a
lock file against a second writer, lets the caller fill a temporary sibling folder and
swaps it in with two renames at the end (the old folder kept until the new one is in
place). SIGINT and SIGTERM while the guard is held raise `Interrupted`; the temporary
folder is removed and the old results stay as they were.

Simplified: the swap is two renames (old aside, new in), with both signals blocked in
between; a SIGKILL or a power cut between the two leaves the old folder under its aside
name (`.NAME.old`), which the next writer of the same folder puts back before anything
else. Locking uses `filelock` (an advisory lock on `.NAME.lock` beside the folder), so it
guards against other clustersim processes, not against other programs.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from filelock import FileLock, Timeout

from simulator.errors import ClustersimError, InputError

#: The signals that stop a write cleanly (the old results are kept).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived while a results folder was being written.

    A `BaseException` (like `KeyboardInterrupt`), so no `except Exception` swallows it.

    Its one argument is the signal number, so that it can be made again from its `args` (as
    SimPy raises again an exception that a process ended with).

    Attributes:
        signum: the signal number; the process exits with 128 + signum.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class FolderBusy(ClustersimError):
    """Another clustersim process is writing the same results folder."""

    exit_code = 2


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write a file through a temporary sibling and a rename, so a crash never leaves half a file.

    Raises:
        InputError: the file cannot be written there (a folder or a device in its place, a
            parent that is not a folder, no permission, a full disk): one line, not a traceback.
    """
    p = Path(path)
    payload = data if isinstance(data, bytes) else data.encode("utf-8")
    if p.is_dir() or (p.exists() and not p.is_file()):
        raise InputError("cannot write a file here: the path is a folder or a device, not a file", file=p)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot write a file here: {exc.strerror or exc}", file=p) from None
    write_files_atomic({p: payload})


def write_files_atomic(files: dict[Path, bytes]) -> None:
    """Write several files, each through a temporary sibling, renamed into place only once
    all are written (signals held during the renames): a failure leaves the files already
    there as they were, never some of this write and some of the one before.

    Raises:
        InputError: a file cannot be written (no room, no permission): one line.
    """
    staged: list[tuple[str, Path]] = []
    path = Path()
    try:
        for path, data in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o644)
        with signals_blocked():
            for tmp, path in staged:
                os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write a file here: {exc.strerror or exc}", file=path) from None
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)


def check_output_file(path: str | Path, inputs: Iterable[str | Path] = ()) -> Path:
    """Refuse an output file that would destroy something: a folder, a device or pipe, one
    of the command's `inputs`, or a file of a run's results folder (`is_results_folder`).

    Raises:
        InputError: one of those; the message names the output path.
    """
    out = Path(path)
    if out.is_dir():
        raise InputError("the output is a folder; give a file name", file=out)
    if out.exists() and not out.is_file():
        raise InputError("the output is a device or a pipe, not a file", file=out)
    for given in inputs:
        try:
            same = os.path.samefile(out, given) if out.exists() else out.resolve() == Path(given).resolve()
        except OSError:
            same = False
        if same:
            raise InputError(f"the output would overwrite the input {str(given)!r}", file=out)
    if out.is_file():
        data = out.name in _RUN_DATA or out.name.endswith(_FRAME_SUFFIXES)
        if is_results_folder(out.parent) and data:
            raise InputError("the output would overwrite a run's results; write it elsewhere", file=out)
        if (out.parent / "manifest.json").is_file() and (data or out.name in _STUDY_DATA):
            raise InputError(
                "the output would overwrite a comparison's or study's results; write it elsewhere", file=out
            )
    return out


def check_writable_folder(folder: str | Path) -> Path:
    """Make sure `folder` can be created or replaced; create its parent folders.

    Raises:
        InputError: the path is a file, lies under a file (`/dev/null/x`), or its parent
            cannot be created or written.
    """
    out = Path(folder)
    if out.is_symlink():
        raise InputError("the output folder is a symbolic link; give the folder it points to", file=out)
    if out.exists() and not out.is_dir():
        raise InputError("output path exists and is not a folder", file=out)
    ancestor = out.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"cannot write here: {ancestor} is not a folder", file=out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        probe = tempfile.mkstemp(prefix=f".{out.name}.probe.", dir=out.parent)
        os.close(probe[0])
        os.unlink(probe[1])
    except OSError as exc:
        raise InputError(f"cannot write here: {exc.strerror or exc}", file=out) from None
    return out


#: the file every results folder of a run holds: an existing folder without it is not replaced
RESULTS_MARK = "summary.json"
#: the list of what a run wrote into its results folder, one name per line (`mark_results`)
RESULTS_INDEX = ".clustersim-results"
#: the data a run writes into its folder (with its frames, `_FRAME_SUFFIXES`): no output
#: file of another command may replace one (`check_output_file`)
_RUN_DATA = frozenset({RESULTS_MARK, RESULTS_INDEX, "scenario.resolved.yaml", "topology.json"})
_FRAME_SUFFIXES = (".parquet", ".csv")
#: the frames a run may write into its folder, each `NAME.parquet` (or `.csv`)
FRAME_NAMES = (
    "ops",
    "flows",
    "links",
    "steps",
    "incidents",
    "segments",
    "runs",
    "power",  # the run level's facility power, when the run is priced (`simulator.metrics.run_cost`)
    # several jobs (`simulator.metrics.jobs`) and cluster runs (`simulator.jobs.scheduler`)
    "jobs",
    "job_links",
    "cluster_jobs",
    "occupancy",
    "cluster_incidents",
)
_FRAME_FILES = frozenset(name + suffix for name in FRAME_NAMES for suffix in _FRAME_SUFFIXES)
#: the data of a comparison's or study's folder besides its frames
_STUDY_DATA = frozenset({"manifest.json", "study.resolved.yaml", "compare.resolved.yaml"})
#: pages written into a run's folder, by the run or later (`clustersim dashboard`, `trace`)
_RUN_PAGES = frozenset({"dashboard.html", "plotly.min.js", "trace.json"})


#: files a desktop or a notebook server drops into any folder it opens: not a user's work
_CLUTTER = frozenset({".DS_Store", "Thumbs.db", "desktop.ini", ".ipynb_checkpoints"})


def _is_clutter(name: str) -> bool:
    return name in _CLUTTER or name.startswith("._")


def note_in_results(*paths: str | Path) -> None:
    """Add `paths` (just written into one run's results folder: a rebuilt dashboard and its
    plotly.js, a trace) to the folder's index, so that the next run may replace them with
    the folder."""
    if not paths:
        return
    index = Path(paths[0]).parent / RESULTS_INDEX
    if not index.is_file():
        return
    names = index.read_text(encoding="utf-8").splitlines()
    added = sorted({Path(p).name for p in paths} - set(names))
    if added:
        write_atomic(index, "".join(f"{n}\n" for n in sorted([*names, *added])))


def is_results_folder(folder: str | Path) -> bool:
    """Whether `folder` is a run's results folder (it holds `RESULTS_MARK`)."""
    return (Path(folder) / RESULTS_MARK).is_file()


def mark_results(staged: Path) -> None:
    """Record in `staged` (a results folder about to be swapped in) the names it holds, so
    that the next writer knows which files are the run's (`foreign_folder_problem`)."""
    names = sorted(e.name for e in staged.iterdir() if e.name != RESULTS_INDEX)
    (staged / RESULTS_INDEX).write_text("".join(f"{n}\n" for n in names), encoding="utf-8")


def foreign_folder_problem(folder: str | Path) -> str | None:
    """Why replacing `folder` whole would lose files that are not a run's results, or None.

    A folder that does not exist or is empty can be written. Otherwise it must be a run's
    results folder (it holds `summary.json`) and hold nothing else than what that run and
    the commands after it wrote (the names listed in its `RESULTS_INDEX`: `note_in_results`
    adds a rebuilt dashboard or a trace; in a folder written before the index existed, the
    names a run writes: its frames by name, summary, resolved scenario, topology, pages). A
    file added by hand (`mydata.csv` too), or a folder of papers with a `summary.json` of its
    own, is not replaced; files
    a desktop drops into any folder (`.DS_Store`, `Thumbs.db`, ...) do not count.
    """
    out = Path(folder)
    if not out.is_dir():
        return None
    try:
        names = sorted(os.listdir(out))
    except OSError:
        return None  # unreadable: the lock and the write report it
    if not names:
        return None
    if RESULTS_MARK not in names:
        return (
            f"output folder {str(folder)!r} holds files that are not a run's results (no {RESULTS_MARK}); "
            "a run replaces its folder whole, so choose a new or empty folder"
        )
    index = out / RESULTS_INDEX
    try:
        own = (
            set(index.read_text(encoding="utf-8").splitlines()) | {RESULTS_INDEX} if index.is_file() else None
        )
    except (OSError, UnicodeDecodeError):
        own = None
    if own is None:  # written before the index: what a run writes, and the pages
        own = set(_RUN_DATA) | _RUN_PAGES | _FRAME_FILES
    extra = [n for n in names if n not in own and not _is_clutter(n)]
    if not extra:
        return None
    more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
    return (
        f"output folder {str(folder)!r} holds {extra[0]!r}{more}, which no run wrote; a run replaces its "
        "folder whole, so move it out or choose a new or empty folder"
    )


def foreign_study_problem(folder: str | Path, kind: str) -> str | None:
    """Why writing a `kind` ("compare" or "study") folder into `folder` could overwrite or
    remove someone's files, or None: it exists, is not empty and holds no manifest of a
    `kind` (a comparison or study writes `manifest.json` first)."""
    import json

    out = Path(folder)
    if not out.is_dir():
        return None
    try:
        if not os.listdir(out):
            return None
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    if isinstance(manifest, dict) and manifest.get("kind") == kind:
        return None
    what = "comparison" if kind == "compare" else "study"
    return (
        f"output folder {str(folder)!r} holds files that are not a {what}'s results (no {kind} "
        "manifest.json); choose a new or empty folder"
    )


@contextlib.contextmanager
def folder_lock(folder: str | Path) -> Iterator[Path]:
    """Hold the lock of a results folder (`.NAME.lock` beside it) for the block.

    Raises:
        InputError: the folder cannot be written or locked.
        FolderBusy: another process holds the lock.
    """
    out = check_writable_folder(folder)
    where = Path(os.path.abspath(out))  # `.` and `..` have no name of their own
    lock = FileLock(str(where.with_name(f".{where.name}.lock")))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise FolderBusy(
            f"{out}: another clustersim process is writing this folder (lock {lock.lock_file})"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot lock the folder: {exc.strerror or exc}", file=out) from None
    try:
        yield out
    finally:
        lock.release()


def interrupted_in(err: BaseException) -> Interrupted:
    """The `Interrupted` behind `err`, which is raised again if there is none.

    A stop signal handled while a compiled function (the fabric's, numba) was calling back
    into Python reaches the caller wrapped: a `SystemError` whose cause is the `Interrupted`.
    """
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        if isinstance(e, Interrupted):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    raise err


@contextlib.contextmanager
def stop_signals_raise() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise `Interrupted` (main thread only; elsewhere
    the handlers are left alone).

    A signal handled while a finalizer runs (`__del__`, a weakref or collector callback,
    which the collector may start anywhere) raises there, where Python would report the
    error as "Exception ignored", print a traceback and go on: the stop would be lost. Such
    an `Interrupted` is kept and raised as the block ends (a stop that late still exits
    128 + signal; the folder is then wholly old or wholly new, as for any stop).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept: list[Interrupted] = []

    def _raise(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    def _keep(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, Interrupted):
            kept.append(unraisable.exc_value)
        else:
            hook(unraisable)

    hook, sys.unraisablehook = sys.unraisablehook, _keep
    old = {s: signal.signal(s, _raise) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():  # a stop handled meanwhile is raised once all are back
            while True:
                try:
                    signal.signal(s, handler)
                    break
                except Interrupted as stop:
                    kept.append(stop)
        sys.unraisablehook = hook  # after the handlers: a stop in a finalizer until then is kept
        if kept:
            raise kept[0]


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends (they are delivered afterwards)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def swap_in(staged: Path, folder: Path) -> Path:
    """Put a filled `staged` folder in the place of `folder` with two renames (signals held
    in between); the old folder, set aside as `.NAME.old`, is removed afterwards."""
    aside = folder.with_name(f".{folder.name}.old")
    with signals_blocked():
        if folder.exists():
            if aside.exists():
                shutil.rmtree(aside)
            os.rename(folder, aside)
        os.rename(staged, folder)
    shutil.rmtree(aside, ignore_errors=True)
    return folder


def replace_folder(folder: str | Path, fill: Callable[[Path], object]) -> Path:
    """Replace `folder` whole: `fill` writes a temporary sibling, which is then swapped in.

    The caller holds whatever lock guards the folder. If `fill` raises (or a signal turned
    into an exception arrives), the temporary folder is removed and `folder` is untouched.

    Raises:
        InputError: `folder` holds files that are not a run's results (`foreign_folder_problem`).
    """
    out = Path(folder)
    problem = foreign_folder_problem(out)
    if problem is not None:
        raise InputError(problem)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    os.chmod(staged, 0o755)
    try:
        fill(staged)
        mark_results(staged)
        return swap_in(staged, out)
    except BaseException:
        with signals_blocked():
            shutil.rmtree(staged, ignore_errors=True)
        raise


class ResultsFolder:
    """A results folder written whole or not at all (use as a context manager).

    On entry: the folder is checked writable, a lock is taken (`FolderBusy` if another
    process holds it), an old folder left aside by a killed swap is put back, and SIGINT /
    SIGTERM start raising `Interrupted`. `stage()` gives an empty temporary sibling folder
    to write into; `commit()` swaps it in. Leaving the block without a commit, by an
    error or a signal, removes the temporary folder and leaves the old one untouched.

    Args:
        folder: the results folder to replace.
    """

    def __init__(self, folder: str | Path) -> None:
        self.given = Path(folder)  # as the user wrote it, for messages
        self.folder = Path(os.path.abspath(folder))
        self.aside = self.folder.with_name(f".{self.folder.name}.old")
        self._tmp: Path | None = None
        self._held = contextlib.ExitStack()

    def __enter__(self) -> ResultsFolder:
        with contextlib.ExitStack() as held:
            held.enter_context(folder_lock(self.given))
            held.enter_context(stop_signals_raise())
            problem = foreign_folder_problem(self.given)  # before `recover` touches anything
            if problem is not None:
                raise InputError(problem)
            self.recover()
            self._held = held.pop_all()
        return self

    def recover(self) -> None:
        """Put back an old folder a killed swap left aside, or drop it when the new one is in;
        drop temporary folders a killed writer left (the lock is held: none is in use)."""
        with signals_blocked():
            if self.aside.is_dir() and not self.folder.exists():
                os.rename(self.aside, self.folder)
            elif self.aside.exists():
                shutil.rmtree(self.aside, ignore_errors=True)
            if self.folder.parent.is_dir():
                for stale in self.folder.parent.glob(f".{glob.escape(self.folder.name)}.tmp-*"):
                    shutil.rmtree(stale, ignore_errors=True)

    def stage(self) -> Path:
        """An empty temporary folder beside the results folder, to write the new results into."""
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix=f".{self.folder.name}.tmp-", dir=self.folder.parent))
            os.chmod(self._tmp, 0o755)
        return self._tmp

    def commit(self) -> Path:
        """Swap the staged folder in for the results folder; the old one is removed afterwards."""
        if self._tmp is None:
            raise RuntimeError("commit() before stage()")
        mark_results(self._tmp)
        done = swap_in(self._tmp, self.folder)
        self._tmp = None  # swapped in: nothing to remove on the way out
        return done

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._tmp is not None:
                with signals_blocked():
                    shutil.rmtree(self._tmp, ignore_errors=True)
                    self._tmp = None
        finally:
            self._held.close()
