"""Reading one PyTorch profiler (Kineto) trace file for `kineto.import_kineto`.

What is read: a `.json` or `.json.gz` file holding a JSON object with a `traceEvents` list
of event objects. The fields the import computes with are checked and made numbers here:
`ts` and `dur` (at least 0) of every complete (`ph: X`) event, `dur` present on every GPU
event, the numeric args the import reads (`INT_ARGS`), a GPU event's stream (its `stream`
arg, else its `tid`), and `distributedInfo.rank` / `world_size` (at most `MAX_RANKS`).

Refused, one line naming the file (and the field, `traceEvents[i].dur`): a file that is not
such JSON, a `.gz` cut short, nesting too deep to read, and any checked field that is not
what it should be.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from pathlib import Path
from typing import Any

from simulator.config.loader import check_regular_file
from simulator.errors import InputError, shown

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_MISSING = object()  # a key the event does not have (a null is a value: None)
#: The most ranks an import makes (`distributedInfo.world_size`, times `dp_replicas`): a
#: million, more than any training job run so far, so that a mistyped world size is refused
#: instead of building a step of billions of ranks.
MAX_RANKS = 1 << 20

#: numeric args the import reads (as int): event args, then the trace's distributedInfo
INT_ARGS = (
    "correlation", "stream", "wait_on_stream", "wait_on_cuda_event_record_corr_id", "Group size",
    "In msg nelems", "Out msg nelems", "Src Rank", "Dst Rank",
)  # fmt: skip


def _number(
    value: Any, path: Path, where: str, *, whole: bool = False, at_least: float | None = None
) -> float:
    """A JSON number (or a string holding one), finite; whole / at least `at_least` if asked.

    Raises:
        InputError: `path: where: expected ..., found ...`.
    """
    what = "a whole number" if whole else "a number"
    if at_least is not None:
        what += f" of at least {at_least:g}"
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError
        x = float(value)
    except (ValueError, OverflowError):  # an integer too large for a float overflows
        found = "no such key (missing)" if value is _MISSING else "null" if value is None else shown(value)
        raise InputError(f"expected {what}, found {found}", file=path, field=where) from None
    if not math.isfinite(x) or (whole and not x.is_integer()) or (at_least is not None and x < at_least):
        raise InputError(f"expected {what}, found {value!r}", file=path, field=where)
    return x


def _check_numbers(data: dict[str, Any], path: Path) -> None:
    """Check, and make numbers of, the fields the import computes with: `ts` and `dur` (at
    least 0) of every complete (`ph: X`) event, the numeric args it reads (`INT_ARGS`), and
    `distributedInfo.rank` / `world_size`.

    Raises:
        InputError: the first such field that is not what it should be, named with its event.
    """
    info = data.get("distributedInfo")
    if info is not None and not isinstance(info, dict):
        raise InputError(
            f"expected a mapping, found {type(info).__name__}", file=path, field="distributedInfo"
        )
    for key in ("rank", "world_size"):
        if info and key in info:
            info[key] = int(_number(info[key], path, f"distributedInfo.{key}", whole=True, at_least=0))
            if info[key] >= MAX_RANKS + (key == "world_size"):
                raise InputError(
                    f"at most {MAX_RANKS:,} ranks are imported, found {info[key]:,}",
                    file=path, field=f"distributedInfo.{key}",
                )  # fmt: skip
    for i, ev in enumerate(data["traceEvents"]):
        if ev.get("ph") != "X":
            continue
        ev["ts"] = _number(ev.get("ts", _MISSING), path, f"traceEvents[{i}].ts")
        if ev.get("cat") in GPU_CATS or "dur" in ev:  # a GPU event's duration is what is imported
            ev["dur"] = _number(ev.get("dur", _MISSING), path, f"traceEvents[{i}].dur", at_least=0)
        args = ev.get("args") if ev.get("args") is not None else {}
        if not isinstance(args, dict):
            raise InputError(f"expected a mapping, found {args!r}", file=path, field=f"traceEvents[{i}].args")
        if ev.get("cat") in GPU_CATS and args.get("stream") is None:  # the CUDA stream is the tid
            tid = str(ev.get("tid", 0)).removeprefix("stream ")  # as its thread is named: 'stream 7'
            ev["tid"] = int(_number(tid, path, f"traceEvents[{i}].tid", whole=True))
        for key in INT_ARGS:
            if args.get(key) is not None:
                args[key] = int(_number(args[key], path, f"traceEvents[{i}].args.{key}", whole=True))


def load_events(path: Path) -> dict[str, Any]:
    """The JSON object of a Kineto trace file, its numbers checked (`_check_numbers`); not a
    trace, or a `.gz` cut short: one-line InputError naming the file."""
    check_regular_file(path)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        data = json.loads(raw)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"not a complete gzip file ({exc or 'cut short'})", file=path) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", file=path) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not JSON ({exc}); expected a PyTorch profiler trace", file=path) from None
    except RecursionError:
        raise InputError("nested too deeply to read; expected a PyTorch profiler trace", file=path) from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise InputError(
            "not a PyTorch profiler trace; expected a JSON object with a 'traceEvents' list", file=path
        )
    for i, ev in enumerate(data["traceEvents"]):
        if not isinstance(ev, dict):
            raise InputError(
                f"traceEvents[{i}]: expected an event object, found {type(ev).__name__}", file=path
            )
    _check_numbers(data, path)
    return data
