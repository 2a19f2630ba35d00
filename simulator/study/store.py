"""A study's results as a durable, resumable store: one Parquet file per finished task.

Layout of a study folder (`clustersim sweep -o FOLDER`):

    manifest.json                       what study this is and which tasks are done
    dataset/runs/<axis>=<value>/.../v0003-s17.parquet       one summary row per task
    dataset/incidents/<axis>=<value>/.../v0003-s17.parquet  the task's incidents
    dataset/segments/<axis>=<value>/.../v0003-s17.parquet   the task's segments
    runs.parquet, summary.parquet, ...  the consolidated tables, once every task is done

Each task (variant x seed) is written as soon as it finishes (each file atomically, then
the manifest), so a stopped study keeps what finished and `--resume` runs only the rest.
Every file carries its variant, axis and seed columns; the `<axis>=<value>` folders
(Hive-style, values percent-encoded) only group them. The manifest records a fingerprint
of the study (its validated spec and seed count): resuming a different study is refused.
The consolidated tables are rebuilt from the dataset in task order, so a resumed study
gives the same tables as one run straight through.

Simplified: the manifest is rewritten whole after each task (a study has at most
`sweep.MAX_STUDY_RUNS` = 10,000 tasks); the dataset is read back with pandas, and queried
with DuckDB by `clustersim query`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from simulator import __version__
from simulator.errors import InputError
from simulator.io import folder_lock, foreign_study_problem, write_atomic
from simulator.metrics.store import MANIFEST, STORE_FRAMES, read_dataset, read_manifest, write_frame
from simulator.study.executor import for_each_task
from simulator.study.sweep import Executor, Study, runs_problem, store_task, study_oracles

#: The files a sweep writes at the top of its folder (removed when a study starts afresh).
STUDY_FILES = (
    MANIFEST,
    "runs.parquet",
    "runs.csv",
    "summary.parquet",
    "summary.csv",
    "sweep.html",
    "study.resolved.yaml",
)


def fingerprint(study: Study, seeds: int, frames: tuple[str, ...] = STORE_FRAMES) -> str:
    """What makes two runs of a study the same study: its validated spec, seeds per variant
    and the frames kept per run (a resumed folder must hold them for every run)."""
    spec = study.spec.model_dump(mode="json")
    chosen = [f for f in STORE_FRAMES if f in frames]  # in the store's order, whatever was given
    kept = {} if chosen == list(STORE_FRAMES) else {"frames": chosen}
    text = json.dumps({"study": spec, "seeds": seeds, "version": __version__, **kept}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def task_key(variant: int, seed: int) -> str:
    """The file stem of one task: `v0003-s17`."""
    return f"v{variant:04d}-s{seed}"


#: Longest `<axis>=<value>` folder name, bytes: a longer one (a long axis name, a long path
#: as a value) is cut and ends in a hash of the whole, so that it stays one name a file
#: system takes (at most 255 bytes) and distinct from every other.
MAX_PARTITION_BYTES = 200


def _partition_name(axis: Any, value: Any) -> str:
    name = f"{quote(str(axis), safe='')}={quote(str(value), safe='')}"
    if len(name) <= MAX_PARTITION_BYTES:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{name[: MAX_PARTITION_BYTES - len(digest) - 1]}~{digest}"


def partition(labels: dict[str, Any]) -> Path:
    """The `<axis>=<value>` folders of a variant (percent-encoded, so any value is one name;
    cut to `MAX_PARTITION_BYTES` with a hash of the whole when longer)."""
    return Path(*[_partition_name(k, v) for k, v in labels.items()])


class StudyStore:
    """The dataset and manifest of one study folder (see the module docstring).

    Args:
        folder: the study folder.
        print_: the study's fingerprint (`fingerprint`).
        axes: the axis columns, in order.
    """

    def __init__(self, folder: Path, print_: str, axes: list[str]) -> None:
        self.folder = Path(folder)
        self.fingerprint = print_
        self.axes = axes
        self.tasks: dict[str, dict[str, Any]] = {}

    def open(self, resume: bool) -> set[str]:
        """Start afresh (the folder's old results removed) or resume; the keys already done.

        Raises:
            InputError: resuming a folder that holds another study (or nothing to resume).
        """
        manifest = read_manifest(self.folder) if resume else None
        if resume and manifest is None:
            raise InputError("nothing to resume: no manifest.json in this folder", file=self.folder)
        if manifest is not None:
            if manifest.get("fingerprint") != self.fingerprint:
                raise InputError(
                    "this folder holds a different study (or other seeds, or other --frames); run "
                    "without --resume to replace it",
                    file=self.folder / MANIFEST,
                )
            self.tasks = {
                k: t
                for k, t in manifest.get("tasks", {}).items()
                if all((self.folder / f).is_file() for f in t["files"].values())
            }
            return set(self.tasks)
        problem = foreign_study_problem(self.folder, "study")  # before anything is removed
        if problem is not None:
            raise InputError(problem)
        self.folder.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.folder / "dataset", ignore_errors=True)
        for name in STUDY_FILES:
            (self.folder / name).unlink(missing_ok=True)
        self._save()
        return set()

    def add(self, variant: int, seed: int, labels: dict[str, Any], frames: dict[str, pd.DataFrame]) -> None:
        """Write one finished task's frames, then record it in the manifest."""
        key = task_key(variant, seed)
        files = {}
        for name, df in frames.items():
            where = self.folder / "dataset" / name / partition(labels)
            where.mkdir(parents=True, exist_ok=True)
            files[name] = str(write_frame(where, key, df).relative_to(self.folder))
        self.tasks[key] = {"variant": variant, "seed": seed, "files": files}
        self._save()

    def _save(self) -> None:
        data = {
            "kind": "study",
            "fingerprint": self.fingerprint,
            "axes": self.axes,
            "frames": list(STORE_FRAMES),
            "tasks": dict(sorted(self.tasks.items())),
        }
        write_atomic(self.folder / MANIFEST, json.dumps(data, indent=1) + "\n")

    def read(self, name: str) -> pd.DataFrame:
        """One frame of every finished task, in task order (variant, then seed)."""
        df = read_dataset(self.folder, name)
        df.attrs["axes"] = list(self.axes)
        return df


@contextmanager
def open_store(
    folder: Path, study: Study, seeds: int, resume: bool, frames: tuple[str, ...] = STORE_FRAMES
) -> Iterator[tuple[StudyStore, set[str]]]:
    """Lock a study folder and open its store: (store, keys already done).

    Raises:
        InputError: more runs than a study holds (`seeds` from the command line), before
            the folder is touched.
    """
    if problem := runs_problem(len(study.variants), seeds):
        raise InputError(problem, field="seeds")
    with folder_lock(folder):
        store = StudyStore(folder, fingerprint(study, seeds, frames), [a.column for a in study.spec.axes])
        yield store, store.open(resume)


def run_into_store(
    store: StudyStore,
    study: Study,
    seeds: int,
    done: set[str],
    executor: Executor = "pool",
    max_workers: int | None = None,
    on_done: Callable[[int, Any], None] | None = None,
    frames: tuple[str, ...] = STORE_FRAMES,
    on_warm: Callable[[int, int], None] | None = None,
) -> int:
    """Run every task not in `done`, writing each into `store` as it finishes; tasks run.

    Args:
        frames: the frames kept per task (`runs` always; `incidents`, `segments`).
        on_warm: progress of the step simulations done first (`study_oracles`).
    """
    chosen = "local-dask" if executor == "local" else executor
    oracles = study_oracles(study, on_warm, chosen, max_workers)
    tasks = [
        (v.index, v.labels, v.spec, v.spec.seed + k, oracles[v.index], frames)
        for v in study.variants
        for k in range(seeds)
        if task_key(v.index, v.spec.seed + k) not in done
    ]

    def _write(i: int, frames: dict[str, pd.DataFrame]) -> None:
        index, labels, _, seed, _, _ = tasks[i]
        store.add(index, seed, labels, frames)
        if on_done is not None:
            on_done(i, None)

    for_each_task(store_task, tasks, _write, chosen, max_workers=max_workers)
    return len(tasks)
