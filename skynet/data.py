"""Datasets and splits. This module holds the dataset item; loaders and splits build on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Item"]


@dataclass(frozen=True, slots=True)
class Item:
    """One dataset item.

    Attributes:
        id: stable identifier (names the item in every message and record).
        input: the item's input columns, by name.
        expected: the item's output column(s), by name; None when the item has no reference.
    """

    id: str
    input: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] | None = None
