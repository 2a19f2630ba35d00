"""What a benchmark table measured: its collective, GPU count and node count.

Logs say these in many ways, or not at all. Each comes from the first source that tells it,
in this order (the table's `notes` say which applied):

    collective: the log (heading, `Collective test starting`, a command line naming
        `*_perf`, `Collective test concluded`) > the `collective` argument > the file name;
    GPUs: `# Rank` lines > the `n_gpus` argument > a `<n>gpu` token in the file name >
        size/count (all_gather, reduce_scatter, all_to_all print the total buffer) >
        busbw/algbw ratio (last resort; stated in the notes);
    nodes: distinct hosts of the `# Rank` lines > a section heading (`2 Nodes`) > the
        `n_nodes` argument > a `<n>node` token in the file name.

When none gives a value, `InputError` asks for the CLI option.

Simplified: the busbw/algbw ratio is read from the four rows with the largest bandwidth,
where the printed rounding matters least; it is trusted only when a whole rank count
explains it within three times that rounding.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.calibration.collective import KINDS, busbw_factor, kinds_in, ranks_from_factor
from simulator.errors import InputError

_DTYPE_BYTES = {
    "int8": 1, "char": 1, "uint8": 1, "fp8": 1, "f8e4m3": 1, "f8e5m2": 1,
    "half": 2, "float16": 2, "bfloat16": 2, "bf16": 2, "fp16": 2,
    "int32": 4, "int": 4, "uint32": 4, "float": 4, "float32": 4,
    "int64": 8, "uint64": 8, "double": 8, "float64": 8,
}  # fmt: skip


def file_token(stem: str, suffix: str) -> int | None:
    """A `<n>gpu` / `<n>node` token of a file name, unless it ends a list like `1-2-4-8node`.

    Args:
        stem: the file name without extension.
        suffix: `gpu` or `node`.

    Returns:
        The number, or None when no token (or disagreeing tokens) name one.
    """
    tokens = re.split(r"[-_.\s]+", stem.lower())
    found = []
    for i, tok in enumerate(tokens):
        m = re.fullmatch(rf"(\d+){suffix}s?", tok)
        if m and not (i > 0 and tokens[i - 1].isdigit()):
            found.append(int(m.group(1)))
    return found[0] if len(set(found)) == 1 else None


def ranks_from_sizes(rows: pd.DataFrame, kind: str) -> int | None:
    """all_gather, reduce_scatter, all_to_all print size = count per rank x ranks x type size."""
    if kind not in ("all_gather", "reduce_scatter", "all_to_all"):
        return None
    r = rows[(rows["count"] > 0) & (rows["size_bytes"] > 0)]
    if r.empty:
        return None
    width = r["dtype"].map(_DTYPE_BYTES)
    if width.isna().any():
        return None
    ratio = r["size_bytes"] / (r["count"] * width)
    vals = set(np.round(ratio.to_numpy(), 6))
    if len(vals) == 1:
        n = float(vals.pop())
        if n.is_integer() and n >= 2:
            return int(n)
    return None


def ranks_from_ratio(rows: pd.DataFrame, kind: str) -> int | None:
    """Rank count from busbw/algbw of the rows with the largest bandwidths.

    Each printed bandwidth is rounded to 0.01 GB/s; a rank count is returned only when its
    factor matches the ratio within three times that rounding.
    """
    r = rows[rows["algbw_bytes_per_s"] >= 1e9]
    if r.empty or kind not in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        return None
    r = r.nlargest(4, "algbw_bytes_per_s")
    ratio = float((r["busbw_bytes_per_s"] / r["algbw_bytes_per_s"]).median())
    n_real = ranks_from_factor(kind, ratio)
    if n_real is None or n_real < 1.5 or n_real > 1e6:
        return None
    n = int(round(n_real))
    tol = 3 * float((0.005e9 / r["algbw_bytes_per_s"] + 0.005e9 / r["busbw_bytes_per_s"]).max())
    if abs(busbw_factor(kind, n) - ratio) <= tol * ratio:
        return n
    return None


def infer_collective(
    log_kind: str | None, argument: str | None, path: Path, first_line: int
) -> tuple[str, str]:
    """The collective of a table and a note saying where it came from.

    Args:
        log_kind: the collective the log names around the table, if any.
        argument: the collective the caller gave, if any.
        path: the log file (its name is the last resort; named in errors).
        first_line: line of the table's first row, named in errors.

    Raises:
        InputError: nothing tells the collective.
    """
    if log_kind is not None:
        return log_kind, f"collective {log_kind} from the log"
    if argument is not None:
        return argument, f"collective {argument} from the argument"
    kinds = kinds_in(path.stem)
    if len(kinds) == 1:
        kind = kinds.pop()
        return kind, f"collective {kind} from the file name"
    raise InputError(
        f"the log does not say which collective it measured; pass --collective (one of {', '.join(KINDS)})",
        file=path,
        line=first_line,
    )


def infer_gpus(
    ranks: Mapping[int, tuple[str, str]],
    argument: int | None,
    rows: pd.DataFrame,
    kind: str,
    path: Path,
    first_line: int,
) -> tuple[int, str]:
    """The GPU (rank) count of a table and a note saying where it came from.

    Args:
        ranks: rank -> (host, device name) from the log's `# Rank` lines.
        argument: the GPU count the caller gave, if any.
        rows: the table's rows (for the size/count and busbw/algbw inferences).
        kind: the table's collective.
        path: the log file (its name may hold a `<n>gpu` token; named in errors).
        first_line: line of the table's first row, named in errors.

    Raises:
        InputError: nothing tells the GPU count.
    """
    if ranks:
        note = f"{len(ranks)} GPUs from the '# Rank' lines"
        if argument is not None and argument != len(ranks):
            note += f" (not --gpus {argument}: the log's own lines win)"
        return len(ranks), note
    if argument is not None:
        return argument, f"{argument} GPUs from the argument"
    if (from_name := file_token(path.stem, "gpu")) is not None:
        return from_name, f"{from_name} GPUs from the file name"
    if (from_sizes := ranks_from_sizes(rows, kind)) is not None:
        return from_sizes, f"{from_sizes} GPUs inferred from size / (count x type size)"
    if (from_ratio := ranks_from_ratio(rows, kind)) is not None:
        return from_ratio, f"{from_ratio} GPUs inferred from the busbw/algbw ratio (last resort)"
    raise InputError("the log does not say how many GPUs took part; pass --gpus", file=path, line=first_line)


def ratio_disagreement(rows: pd.DataFrame, kind: str, n_gpus: int) -> str | None:
    """A sentence when the busbw/algbw ratio of the rows implies another rank count than `n_gpus`."""
    implied = ranks_from_ratio(rows, kind)
    if implied is not None and implied != n_gpus:
        return f"busbw/algbw ratio implies {implied} ranks, not {n_gpus}"
    return None


def infer_nodes(
    ranks: Mapping[int, tuple[str, str]],
    heading_nodes: int | None,
    argument: int | None,
    path: Path,
    first_line: int,
) -> tuple[int, str]:
    """The node count of a table and a note saying where it came from.

    Args:
        ranks: rank -> (host, device name) from the log's `# Rank` lines.
        heading_nodes: the node count the table's section heading states, if any.
        argument: the node count the caller gave, if any.
        path: the log file (its name may hold a `<n>node` token; named in errors).
        first_line: line of the table's first row, named in errors.

    Raises:
        InputError: nothing tells the node count.
    """
    if ranks:
        nodes = len({host for host, _ in ranks.values()})
        note = f"{nodes} node(s) from the hosts of the '# Rank' lines"
        if argument is not None and argument != nodes:
            note += f" (not --nodes {argument}: the log's own lines win)"
        return nodes, note
    if heading_nodes is not None:
        return heading_nodes, f"{heading_nodes} node(s) from the section heading"
    if argument is not None:
        return argument, f"{argument} node(s) from the argument"
    if (from_name := file_token(path.stem, "node")) is not None:
        return from_name, f"{from_name} node(s) from the file name"
    raise InputError(
        "the log does not say how many nodes took part (no '# Rank ... on HOST' lines); pass --nodes",
        file=path,
        line=first_line,
    )
