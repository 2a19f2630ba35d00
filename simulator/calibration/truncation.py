"""Signs that a benchmark result table was cut short, and the size format its warnings use.

A log copied from a page or captured part-way can stop before the large messages that show
the links' bandwidth; fitting it then reports a bandwidth far below the real one. The
checks here look only at what the table itself says (its largest size, the `maxBytes` and
`step` of the run's `# nThread` header line, the `# Avg bus bandwidth` trailer).

Simplified: the checks cannot tell a deliberate excerpt from a cut log when the excerpt
drops its trailer but keeps the complete run header; such a table warns.
"""

from __future__ import annotations

#: below this largest size a table cannot show the bandwidth of the links
MIN_FULL_SIZE_BYTES = 2**20


def format_bytes(size_bytes: float) -> str:
    """A size in binary units with 3 significant digits: `512 B`, `4 KiB`, `1.5 MiB`, `16 GiB`.

    Args:
        size_bytes: the size, bytes.

    Returns:
        The size in the largest binary unit it reaches (bytes below 1 KiB).
    """
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.3g} {unit}"
    return f"{size_bytes:.0f} B"


def cut_warnings(
    largest_size_bytes: int,
    max_bytes: int | None,
    step: tuple[int, str] | None,
    trailer: bool,
    *,
    header: bool,
) -> list[str]:
    """Signs that a result table was cut short (a log copied or captured part-way).

    * The largest measured size is under `MIN_FULL_SIZE_BYTES` (1 MiB): the fit then sees
      only latency-bound messages and its bandwidth is far below the links' (the first 10
      rows of an H100 log, up to 4 KiB, fit 5.8 GB/s instead of about 480).
    * The run's header is complete (column header and a `# nThread ... maxBytes N` line)
      but no `# Avg bus bandwidth` trailer follows the rows and they stop before maxBytes
      (the next size, by the header's `step`, would still fit under it).

    Excerpts that keep only some large sizes (no `# nThread` line, or with the trailer)
    are legitimate and do not warn.

    Args:
        largest_size_bytes: largest message size of the table.
        max_bytes: the `maxBytes` of the run's `# nThread` line, None when not printed.
        step: the `step:` of that line as (value, `factor` or `bytes`), None when not printed.
        trailer: a `# Avg bus bandwidth` line follows the rows.
        header: the table has its column header.

    Returns:
        One sentence per sign found (empty when the table looks complete).
    """
    out = []
    if largest_size_bytes < MIN_FULL_SIZE_BYTES:
        out.append(
            f"largest measured size is {format_bytes(largest_size_bytes)}, under 1 MiB: the table looks cut "
            "short and its fitted bandwidth only reflects small messages"
        )
    elif header and not trailer and max_bytes is not None:
        if step is None:
            following_size_bytes = largest_size_bytes + 1
        elif step[1] == "factor":
            following_size_bytes = largest_size_bytes * max(step[0], 2)
        else:
            following_size_bytes = largest_size_bytes + max(step[0], 1)
        if following_size_bytes <= max_bytes:
            out.append(
                f"rows stop at {format_bytes(largest_size_bytes)}, before the maxBytes "
                f"{format_bytes(max_bytes)} of the header, and no '# Avg bus bandwidth' line follows: "
                "the log looks cut short"
            )
    return out
