"""Writing and reading a run folder: frames as Parquet (pyarrow) or CSV, JSON, YAML.

Every file is written to a temporary sibling and renamed, so an interrupted write never
leaves half a file, and files from an earlier run are replaced only once the new one is
complete.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.commands.common import write_atomic
from simulator.errors import InputError

FRAME_NAMES = ("ops", "flows", "links", "steps", "incidents", "segments", "runs")


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_frame(folder: Path, name: str, df: pd.DataFrame) -> Path:
    if _has_pyarrow():
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        path = folder / f"{name}.parquet"
        write_atomic(path, buf.getvalue())
    else:
        path = folder / f"{name}.csv"
        write_atomic(path, df.to_csv(index=False))
    return path


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def read_frames(folder: str | Path) -> dict[str, pd.DataFrame]:
    """Read every frame saved in a run folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("results folder not found", file=folder)
    frames: dict[str, pd.DataFrame] = {}
    for name in FRAME_NAMES:
        pq, csv = folder / f"{name}.parquet", folder / f"{name}.csv"
        if pq.is_file():
            frames[name] = pd.read_parquet(pq)
        elif csv.is_file():
            frames[name] = pd.read_csv(csv)
    if not frames:
        raise InputError("no result frames (ops/steps/... .parquet or .csv) in this folder", file=folder)
    return frames


def read_summary(folder: str | Path) -> dict[str, Any]:
    p = Path(folder) / "summary.json"
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("summary.json not found", file=p) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg}", file=p, line=exc.lineno) from None
