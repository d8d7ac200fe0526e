"""A numpy array that grows by doubling, so appending one value at a time stays amortized O(1).

Views handed out by :meth:`Growable.view` stay valid after later appends (growth allocates a new
buffer instead of resizing in place), which lets a matcher keep using arrays it already holds.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

__all__ = ["Growable"]


class Growable:
    __slots__ = ("_data", "_size")

    def __init__(self, dtype: npt.DTypeLike, initial: npt.ArrayLike | None = None) -> None:
        values = np.asarray(initial if initial is not None else [], dtype=dtype)
        self._data = np.empty(max(16, 2 * len(values)), dtype=dtype)
        self._data[: len(values)] = values
        self._size = len(values)

    def __len__(self) -> int:
        return self._size

    def _reserve(self, extra: int) -> None:
        needed = self._size + extra
        if needed > len(self._data):
            grown = np.empty(max(needed, 2 * len(self._data)), dtype=self._data.dtype)
            grown[: self._size] = self._data[: self._size]
            self._data = grown

    def append(self, value: int | float) -> None:
        self._reserve(1)
        self._data[self._size] = value
        self._size += 1

    def extend(self, values: Iterable[int] | npt.ArrayLike) -> None:
        array = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
        self._reserve(len(array))
        self._data[self._size : self._size + len(array)] = array
        self._size += len(array)

    def view(self) -> np.ndarray:
        """The current values (a view: do not write through it)."""
        return self._data[: self._size]
