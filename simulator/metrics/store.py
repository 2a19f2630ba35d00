"""Writing and reading a run folder: frames as Parquet (pyarrow) or CSV, JSON, YAML.

Every file is written to a temporary sibling and renamed, so an interrupted write never
leaves half a file, and files from an earlier run are replaced only once the new one is
complete.

Simplified: without pyarrow frames are written as CSV, which keeps no column types or
frame attributes; reading one back, the columns named in `TEXT_COLUMNS` are read as text
and empty text is "" (as Parquet keeps it), the rest as pandas infers.
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import math
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.errors import InputError
from simulator.io import FRAME_NAMES, write_atomic
from simulator.metrics.frames import canonical_text

# text columns of the frames: read back as text even when every value is empty
TEXT_COLUMNS = frozenset(
    {
        "op_id",
        "kind",
        "tag",
        "stream",
        "collective",
        "algorithm",
        "protocol",
        "gpu",
        "role",
        "label",
        "link",
        "src",
        "dst",
        "medium",
        "phase",
        "component",
        "component_class",
        "cause",
        "policy",
        "variant",
        "state",
    }
)

#: The manifest of a study folder stored task by task (`simulator.study.store`).
MANIFEST = "manifest.json"

#: The frames a stored study keeps per task, under `dataset/<frame>/`.
STORE_FRAMES = ("runs", "incidents", "segments")


def _has_pyarrow() -> bool:
    # pyarrow is an optional dependency: probed when a frame is written, not imported above
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


#: Text columns that may hold printed sets, written with their elements sorted.
SET_TEXT_COLUMNS = ("state",)


def canonical_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The frame as written: printed sets in `SET_TEXT_COLUMNS` sorted, so the bytes of a frame
    do not depend on PYTHONHASHSEED (a copy only when something changes)."""
    cols = [
        c
        for c in SET_TEXT_COLUMNS
        if c in df.columns and not pd.api.types.is_numeric_dtype(df[c]) and not _canonical_already(df[c])
    ]
    if not cols:
        return df
    out = df.copy()
    for c in cols:
        out[c] = [canonical_text(v) if isinstance(v, str) else v for v in out[c]]
    out.attrs = dict(df.attrs)
    return out


def _canonical_already(col: pd.Series) -> bool:
    """Whether a text column (pandas' string dtype) reads the same once canonical: then
    rewriting it would give the same column (its distinct values are checked, not its rows)."""
    if isinstance(col.dtype, pd.StringDtype):
        return all(canonical_text(v) == v for v in col.dropna().unique())
    return False


def write_frame(folder: Path, name: str, df: pd.DataFrame) -> Path:
    """Write one frame as `NAME.parquet` (with pyarrow) or `NAME.csv`; returns the path written.

    Printed sets in text columns are written sorted (`canonical_frame`), so the same run
    gives the same bytes whatever PYTHONHASHSEED.
    """
    df = canonical_frame(df)
    if _has_pyarrow():
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        path = folder / f"{name}.parquet"
        write_atomic(path, buf.getvalue())
    else:
        path = folder / f"{name}.csv"
        write_atomic(path, df.to_csv(index=False))
    return path


def write_json(path: Path, data: Any, finite: bool = False) -> None:
    """Write indented JSON (numpy numbers as plain numbers, anything else unknown as text).

    With `finite`, a number that is not finite (NaN, an infinity) is written as `null`:
    JSON has no such numbers, and other readers refuse or misread Python's spellings.
    """
    write_atomic(path, dumps_indented(_nulls_for_nonfinite(data) if finite else data) + "\n")


def _nulls_for_nonfinite(o: Any) -> Any:
    """`o` with every float that is not finite (in mappings and lists, at any depth) as None."""
    if isinstance(o, float | np.floating):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _nulls_for_nonfinite(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_nulls_for_nonfinite(v) for v in o]
    if isinstance(o, tuple):
        return tuple(_nulls_for_nonfinite(v) for v in o)
    return o


#: JSON values the encoder writes as one token (numpy floats are floats and write alike)
_SCALAR_TYPES = (str, int, float, bool, type(None))


def dumps_indented(data: Any) -> str:
    """`json.dumps(data, indent=2, default=...)`, character for character, faster.

    With an indent the standard library encodes in Python, one generator step per value
    (0.4 s for the topology of 16,384 GPUs). Here every mapping or list whose values are
    all scalars (the nodes and links of a topology) is encoded by the C encoder, whose
    item separator is set to the line break and indentation the indented form puts between
    items; anything else (keys that are not text, values of other types) is encoded by
    `json.dumps` itself, indented to its depth.
    """
    parts: list[str] = []
    _encode(data, 0, parts)
    return "".join(parts)


def _is_flat_dict(o: Any) -> bool:
    """A mapping, not empty, of text keys to scalars."""
    return (
        isinstance(o, dict)
        and bool(o)
        and all(type(k) is str for k in o)
        and all(isinstance(v, _SCALAR_TYPES) for v in o.values())
    )


def _all_flat_dicts(items: list[Any]) -> bool:
    """`all(_is_flat_dict(v) for v in items)`, with the types of all keys and of all values
    each gathered in one pass (the nodes and links of a topology: 100,000 mappings)."""
    if not all(isinstance(o, dict) and o for o in items):
        return False
    key_types = set(map(type, itertools.chain.from_iterable(items)))
    value_types = set(map(type, itertools.chain.from_iterable(map(dict.values, items))))
    return key_types <= {str} and all(issubclass(t, _SCALAR_TYPES) for t in value_types)


@functools.cache
def _flat_encoder(level: int) -> Callable[[Any], str]:
    """Compact JSON of a mapping or list of scalars at `level`, items joined by "," and the
    line break and indentation of the level below (the C encoder where there is one)."""
    item_separator = ",\n" + "  " * (level + 1)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.JSONEncoder(separators=(item_separator, ": ")).encode
    encode = make(
        None, None, json.encoder.encode_basestring_ascii, None, ": ", item_separator, False, False, True
    )
    return lambda o: "".join(encode(o, 0))


def _encode(o: Any, level: int, parts: list[str]) -> None:
    inner = "\n" + "  " * (level + 1)
    if isinstance(o, dict) and o and all(type(k) is str for k in o):
        if _is_flat_dict(o):
            parts += ("{", inner, _flat_encoder(level)(o)[1:-1], inner[:-2], "}")
            return
        parts.append("{")
        for i, (k, v) in enumerate(o.items()):
            parts += (inner if i == 0 else "," + inner, json.dumps(k), ": ")
            _encode(v, level + 1, parts)
        parts += (inner[:-2], "}")
        return
    if isinstance(o, list) and o:
        if _all_flat_dicts(o):
            # one call for the whole list: the items' separator is that of their keys, and
            # "}" + separator + "{" occurs only between two items (a key starts with '"')
            pad0, pad1, pad2 = ("\n" + "  " * (level + i) for i in range(3))
            text = _flat_encoder(level + 1)(o)[2:-2]
            text = text.replace("}," + pad2 + "{", pad1 + "}," + pad1 + "{" + pad2)
            parts += ("[", pad1, "{", pad2, text, pad1, "}", pad0, "]")
            return
        if all(isinstance(v, _SCALAR_TYPES) for v in o):
            parts += ("[", inner, _flat_encoder(level)(o)[1:-1], inner[:-2], "]")
            return
        parts.append("[")
        for i, v in enumerate(o):
            parts.append(inner if i == 0 else "," + inner)
            _encode(v, level + 1, parts)
        parts += (inner[:-2], "]")
        return
    text = json.dumps(o, indent=2, sort_keys=False, default=_json_default)
    parts.append(text.replace("\n", "\n" + "  " * level) if level else text)


def node_link_data(graph: Any, drop_graph_keys: Collection[str] = ()) -> dict[str, Any]:
    """`nx.node_link_data(graph, edges="links")` with the graph attributes named in
    `drop_graph_keys` left out: the same mappings in the same order.

    For a plain graph or digraph the nodes' and links' mappings are built in one walk of
    its nodes and one of its adjacency (networkx reads every node back by name and lists
    the links through its edge view's generator, twice as long at 16,384 GPUs); any other
    graph class is left to networkx.
    """
    import networkx as nx

    if type(graph) not in (nx.Graph, nx.DiGraph):
        data: dict[str, Any] = nx.node_link_data(graph, edges="links")
    else:
        links: list[dict[str, Any]] = []
        append = links.append
        seen: set[Any] = set()  # an undirected link is listed at the turn of its end met first
        directed = graph.is_directed()
        for n, nbrs in graph.adjacency():
            for m, d in nbrs.items():
                if m not in seen:
                    append({**d, "source": n, "target": m})
            if not directed:
                seen.add(n)
        data = {
            "directed": directed,
            "multigraph": False,
            "graph": graph.graph,
            "nodes": [{**d, "id": n} for n, d in graph.nodes(data=True)],
            "links": links,
        }
    data["graph"] = {k: v for k, v in data["graph"].items() if k not in drop_graph_keys}
    return data


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def read_table(folder: str | Path, name: str) -> pd.DataFrame | None:
    """One saved frame (`NAME.parquet`, else `NAME.csv`), or None if neither exists.

    CSV text columns come back as "" where they were empty (not NaN), as Parquet keeps
    them; an unreadable file is an InputError naming it.
    """
    folder = Path(folder)
    pq, csv = folder / f"{name}.parquet", folder / f"{name}.csv"
    path = pq if pq.is_file() else csv if csv.is_file() else None
    if path is None:
        return None
    try:
        if path is pq:
            return pd.read_parquet(pq)
        header = pd.read_csv(csv, nrows=0).columns
        df = pd.read_csv(csv, dtype={c: str for c in header if c in TEXT_COLUMNS})
    except Exception as exc:  # pyarrow, the CSV parser and the OS raise many kinds
        raise InputError(
            f"cannot read saved frame ({type(exc).__name__}: {exc})".splitlines()[0], file=path
        ) from None
    for col in df.columns:
        if not pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]):
            df[col] = df[col].fillna("")
    return df


def read_frames(folder: str | Path) -> dict[str, pd.DataFrame]:
    """Read every frame saved in a run folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("results folder not found", file=folder)
    frames: dict[str, pd.DataFrame] = {}
    for name in FRAME_NAMES:
        df = read_table(folder, name)
        if df is not None:
            frames[name] = df
    if not frames:
        raise InputError("no result frames (ops/steps/... .parquet or .csv) in this folder", file=folder)
    return frames


def read_summary(folder: str | Path) -> dict[str, Any]:
    """A run folder's summary.json.

    Raises:
        InputError: the file is missing or is not valid JSON.
    """
    p = Path(folder) / "summary.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("summary.json not found", file=p) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg}", file=p, line=exc.lineno) from None
    except (OSError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError(f"cannot read summary ({type(exc).__name__})", file=p) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object of summary figures", file=p, line=1)
    return data


#: The frames every step-level run folder holds (`clustersim run` writes all four).
RUN_FRAMES = ("ops", "flows", "links", "steps")


def check_run_frames(frames: dict[str, pd.DataFrame], folder: str | Path) -> None:
    """Raise if a step-level run folder lacks one of `RUN_FRAMES` (a partial or damaged folder);
    a cluster run (a `cluster_jobs` frame) simulates no step and has none of them."""
    missing = [name for name in RUN_FRAMES if name not in frames and "cluster_jobs" not in frames]
    if missing:
        raise InputError(
            f"no {missing[0]} frame ({missing[0]}.parquet / .csv): an incomplete run folder "
            f"(a run writes {', '.join(RUN_FRAMES)})",
            file=folder,
        )


def read_manifest(folder: str | Path) -> dict[str, Any] | None:
    """A study folder's manifest.json, or None when there is none.

    Raises:
        InputError: the manifest is not valid JSON or not a study manifest.
    """
    p = Path(folder) / MANIFEST
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"unreadable manifest ({type(exc).__name__})", file=p) from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), dict):
        raise InputError("not a study manifest (no tasks)", file=p)
    return data


def read_dataset(folder: str | Path, name: str) -> pd.DataFrame:
    """One frame of a stored study: every finished task's file (as the manifest lists them),
    stacked in task order (variant, then seed); empty when no task has finished.

    Raises:
        InputError: the manifest or a task file is missing or unreadable.
    """
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        raise InputError(f"{MANIFEST} not found", file=folder)
    tasks = sorted(manifest["tasks"].values(), key=lambda t: (t["variant"], t["seed"]))
    parts = []
    for t in tasks:
        rel = t.get("files", {}).get(name)
        if rel is None:
            continue
        path = folder / rel
        df = read_table(path.parent, path.stem)
        if df is None:
            raise InputError("a finished task's file is missing", file=path)
        parts.append(df)
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts, ignore_index=True)


#: The columns a saved frame must have to be read back (the rest are optional).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "ops": ("step", "op_id", "kind", "tag", "rank", "stream", "started_at_s", "finished_at_s", "gpu"),
    "flows": ("flow_id", "size_bytes", "started_at_s", "finished_at_s"),
    "links": ("link_id", "link", "started_at_s", "finished_at_s", "utilization"),
    "steps": ("step", "rank", "step_time_s", "compute_s", "exposed_comm_s", "idle_s"),
    "incidents": ("time_s", "kind"),
    "segments": ("start_s", "end_s", "phase"),
    "runs": ("seed", "goodput"),
}

#: Frames every step-level run writes, and those a run with failures adds.
STEP_FRAMES = ("ops", "flows", "links", "steps")
RUN_LEVEL_FRAMES = ("incidents", "segments", "runs")


def check_frame(folder: Path, name: str, df: pd.DataFrame) -> None:
    """A frame read back has the columns its readers need.

    Raises:
        InputError: columns are missing (naming the file).
    """
    missing = [c for c in REQUIRED_COLUMNS.get(name, ()) if c not in df.columns]
    if missing:
        path = folder / f"{name}.parquet"
        raise InputError(f"not a {name} frame: missing column(s) {', '.join(missing)}", file=path)


def read_run_folder(folder: str | Path) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """A run folder's frames and summary, checked complete: the step-level frames (non-empty
    `ops` and `steps`), the failure frames when the summary says the run has a run level,
    each with its required columns, and a readable topology.json when there is one.

    Raises:
        InputError: a file is missing, unreadable or not what it should be (one line).
    """
    folder = Path(folder)
    summary = read_summary(folder)
    if not isinstance(summary, dict):
        raise InputError("summary.json is not a JSON object", file=folder / "summary.json")
    frames = read_frames(folder)
    needed = [*STEP_FRAMES, *(RUN_LEVEL_FRAMES if summary.get("run_level") else ())]
    if "cluster_jobs" in frames:  # a cluster run simulates no step (simulator.jobs.scheduler)
        needed = ["cluster_jobs", "occupancy"]
    for name in needed:
        if name not in frames:
            raise InputError(f"{name} frame missing ({name}.parquet / {name}.csv)", file=folder)
    for name, df in frames.items():
        check_frame(folder, name, df)
    for name in ("ops", "steps"):
        if name in needed and frames[name].empty:
            raise InputError(f"{name} frame is empty", file=folder / f"{name}.parquet")
    topo = folder / "topology.json"
    if topo.is_file():
        try:
            json.loads(topo.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON: {exc.msg}", file=topo, line=exc.lineno) from None
        except UnicodeDecodeError:
            raise InputError("not a saved topology (UnicodeDecodeError)", file=topo) from None
    return frames, summary
