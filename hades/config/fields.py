"""What a setting's ``Field`` carries beyond pydantic's own: the mark of a secret."""

from __future__ import annotations

from typing import Final

from pydantic.config import JsonDict
from pydantic.fields import FieldInfo

SECRET: Final[JsonDict] = {"secret": True}
"""The ``json_schema_extra`` of a setting whose value must never be shown."""


def is_secret(field: FieldInfo) -> bool:
    """Whether the setting ``field`` holds a secret (marked with :data:`SECRET`)."""
    extra = field.json_schema_extra
    return isinstance(extra, dict) and extra.get("secret") is True
