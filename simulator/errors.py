"""Errors a user can cause, and how they are shown.

Every mistake in an input file becomes one `InputError` that knows the file, the line
(where the YAML gives one), the field path and what was expected. The CLI prints
`str(error)` on one line and exits 2; nothing else in the package prints tracebacks for
user mistakes.
"""

from __future__ import annotations

from pathlib import Path


class ClustersimError(Exception):
    """Base of every error clustersim raises on purpose (bad input, impossible request)."""

    exit_code = 1


def shown(value: object, limit: int = 40) -> str:
    """`repr(value)` for a message, cut to `limit` characters (a 400-digit number, a long
    text): the first `limit - 3` and "..."."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class InputError(ClustersimError):
    """A problem in an input file: `file:line: field.path: message`.

    Args:
        message: what is wrong and what was expected.
        file: the file that holds the mistake, if any.
        line: 1-based line number, if known.
        field: dotted field path inside the file (`workload.ops.3.deps`), if any.
    """

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        super().__init__(self.__str__())

    def prefixed(self, prefix: str) -> InputError:
        """The same mistake at the same place, `prefix` before its message (e.g. which
        compare variant met it in a file the variants share)."""
        return InputError(prefix + self.message, file=self.file, line=self.line, field=self.field)

    @property
    def place(self) -> tuple[str | None, int | None, str | None]:
        """(file, line, field) of the mistake."""
        return self.file, self.line, self.field

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}".replace("\n", " ")


class FieldError(InputError, ValueError):
    """A bad value of one field, found by a schema validator of the mapping that holds it.

    It is also a `ValueError`, so pydantic reports it like any other invalid value; the
    loader then adds `field` to the mapping's path and shows `message` as it is.
    """


class InputErrors(InputError):
    """Several input problems found at once (one per line when printed)."""

    def __init__(self, errors: list[InputError]) -> None:
        self.errors = errors
        first = errors[0]
        super().__init__(first.message, file=first.file, line=first.line, field=first.field)

    def prefixed(self, prefix: str) -> InputErrors:
        return InputErrors([e.prefixed(prefix) for e in self.errors])

    def lines(self) -> list[str]:
        return [str(e) for e in self.errors]


class SimulationError(ClustersimError):
    """The scenario is valid but cannot be simulated (e.g. a GPU cut off from the fabric)."""

    exit_code = 3


def lines_at(
    err: ClustersimError, prefix: str, file: str | None, line: int | None, field: str | None
) -> list[str]:
    """The lines of `err`, `prefix` before each message: a problem that names its own file
    keeps its place; any other (a simulation error, a problem of no file) is placed at
    `file:line: field`, so that every line keeps the `file:line: field.path: message` form."""
    out = []
    for e in err.errors if isinstance(err, InputErrors) else [err]:
        if isinstance(e, InputError) and e.file:
            out.append(str(e.prefixed(prefix)))
        else:
            message = e.message if isinstance(e, InputError) else str(e)
            out.append(str(InputError(prefix + message, file=file, line=line, field=field)))
    return out
