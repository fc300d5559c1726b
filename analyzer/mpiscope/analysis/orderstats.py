"""Exact medians and quantiles of values held as sorted runs, grouped by a key.

The message statistics (stats.py) take medians and quantiles per group (a size bucket, a
path). The pandas engine holds one sorted run per group; the Dask engine one per rank
(each rank's messages, sorted on its worker and memory-mapped on the client), and picks
the order statistics across the runs without reading them whole: the same numbers, since
a median or a quantile is a function of two order statistics and the group's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# a group of at most this many values across its runs is read whole and indexed;
# larger ones are searched in the runs (binary search on the value, a page per step)
GATHER = 1 << 20


@dataclass
class Groups:
    """Values sorted within each group: group `keys[i]` is `values[offsets[i]:offsets[i+1]]`."""

    keys: np.ndarray  # int64, ascending
    offsets: np.ndarray  # int64, len(keys) + 1
    values: np.ndarray  # int64 or float64

    @classmethod
    def of(cls, keys: np.ndarray, values: np.ndarray) -> Groups:
        order = np.lexsort((values, keys))
        k = np.asarray(keys, dtype=np.int64)[order]
        uniq, first = np.unique(k, return_index=True)
        return cls(uniq, np.append(first, len(k)).astype(np.int64), np.asarray(values)[order])

    def run(self, key: int) -> np.ndarray:
        i = int(np.searchsorted(self.keys, key))
        if i == len(self.keys) or self.keys[i] != key:
            return self.values[:0]
        return self.values[self.offsets[i]:self.offsets[i + 1]]


def _key(v: float | int) -> int:
    """An integer with the order of the values (floats: their bits, negatives flipped)."""
    if isinstance(v, np.floating | float):
        b = int(np.float64(v).view(np.int64))
        return b if b >= 0 else -(b & 0x7FFFFFFFFFFFFFFF) - 1
    return int(v)


def _value(key: int, dtype: np.dtype):
    if np.issubdtype(dtype, np.floating):
        b = key if key >= 0 else (-(key + 1)) | -0x8000000000000000
        return np.int64(b).view(np.float64)
    return dtype.type(key)


def kth(runs: Sequence[np.ndarray], k: int, gather: int = GATHER):
    """The k-th smallest (0-based) of the values of all `runs` (each sorted)."""
    runs = [r for r in runs if len(r)]
    if len(runs) == 1:
        return runs[0][k]
    n = sum(len(r) for r in runs)
    if n <= gather:
        return np.partition(np.concatenate(runs), k)[k]
    dtype = runs[0].dtype
    lo = min(_key(r[0]) for r in runs)
    hi = max(_key(r[-1]) for r in runs)
    # the smallest value with more than k values at or below it
    while lo < hi:
        mid = lo + (hi - lo) // 2
        v = _value(mid, dtype)
        if sum(int(np.searchsorted(r, v, "right")) for r in runs) > k:
            hi = mid
        else:
            lo = mid + 1
    return _value(lo, dtype)


def median(runs: Sequence[np.ndarray], gather: int = GATHER, scale: float = 1.0) -> float:
    """The median as pandas takes it (the mean of the two middle values of an even
    count), of the values divided by `scale` (as the caller's values would be)."""
    n = sum(len(r) for r in runs)
    a = float(kth(runs, (n - 1) // 2, gather)) / scale
    if n % 2:
        return a
    return (a + float(kth(runs, n // 2, gather)) / scale) / 2


def quantile(runs: Sequence[np.ndarray], q: float, gather: int = GATHER) -> float:
    """The q-quantile with linear interpolation, as pandas' groupby quantile takes it."""
    n = sum(len(r) for r in runs)
    idx = q * (n - 1)
    i = int(idx)
    a = float(kth(runs, i, gather))
    b = float(kth(runs, min(i + 1, n - 1), gather))
    return a + (b - a) * (idx % 1)
