"""The strict base of every input schema: unknown keys are errors, fields are documented."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """Base of all input specs: frozen, unknown keys forbidden."""

    model_config = ConfigDict(extra="forbid", frozen=True)
