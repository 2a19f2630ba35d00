"""The strict base of every input schema: unknown keys are errors, fields are documented."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Spec(BaseModel):
    """Base of all input specs: frozen, unknown keys forbidden."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class FileRef(Spec):
    """A reference to another input file, named relative to the file that names it: `{file: a.yaml}`."""

    file: str = Field(description="Path of the referenced file, relative to the file that names it.")
