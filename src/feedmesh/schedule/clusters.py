"""K-means clustering of 24-hour posting profiles (the paper's section 4.3.1, K = 12).

Each feed is a 24-dimensional vector: the share of its posts in each UTC hour. Feeds with enough
posts are clustered; the centroids are the representative daily patterns that sparse feeds borrow
(the paper schedules every feed by its cluster's centroid). The fit is seeded k-means++ followed by
Lloyd iterations, all vectorized; a refit starts from the previous centroids so that cluster
labels stay stable from one refit to the next.
"""

from __future__ import annotations

import numpy as np

__all__ = ["assign_clusters", "fit_kmeans", "normalized_profiles"]


def normalized_profiles(hourly: np.ndarray) -> np.ndarray:
    """Rows of ``hourly`` scaled to sum to 1 (rows without posts become flat 1/24)."""
    totals = hourly.sum(axis=1, keepdims=True)
    flat = np.full_like(hourly, 1.0 / hourly.shape[1], dtype=np.float64)
    return np.divide(hourly, totals, out=flat, where=totals > 0)


def _squared_distances(points: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    d = (
        (points**2).sum(axis=1)[:, None]
        - 2.0 * points @ centroids.T
        + (centroids**2).sum(axis=1)[None, :]
    )
    return np.maximum(d, 0.0)


def assign_clusters(points: np.ndarray, centroids: np.ndarray, *,
                    previous: np.ndarray | None = None, stickiness: float = 1.0) -> np.ndarray:
    """Index of the nearest centroid for each row of ``points``.

    With ``previous`` labels (-1: none), a row keeps its previous cluster while that centroid's
    squared distance is within ``stickiness`` times the nearest one's: a profile learned from a
    sliding window wobbles from day to day, and a plan that follows every wobble between two
    similar clusters moves fetches around for nothing (and each move can cost a fetch).
    """
    if len(points) == 0:
        return np.zeros(0, dtype=np.int64)
    distances = _squared_distances(points, centroids)
    labels = distances.argmin(axis=1)
    if previous is not None and stickiness > 1.0:
        rows = np.flatnonzero((previous >= 0) & (previous < len(centroids)))
        old = previous[rows]
        keep = distances[rows, old] <= stickiness * distances[rows, labels[rows]] + 1e-12
        labels[rows[keep]] = old[keep]
    return labels


def fit_kmeans(points: np.ndarray, k: int, rng: np.random.Generator, *,
               init: np.ndarray | None = None, iterations: int = 50,
               tolerance: float = 1e-7) -> np.ndarray:
    """Centroids (k x d) of ``points`` (n x d). Fewer distinct points than k: k-means on what
    exists,
    padded with copies so the caller always gets k rows."""
    n, d = points.shape
    if n == 0:
        return np.full((k, d), 1.0 / d) if init is None else init.copy()
    if init is not None and init.shape == (k, d):
        centroids = init.astype(np.float64).copy()
    else:
        centroids = np.empty((k, d))
        centroids[0] = points[rng.integers(n)]
        closest = _squared_distances(points, centroids[:1])[:, 0]
        for c in range(1, k):
            total = closest.sum()
            if total <= 0:
                centroids[c:] = centroids[rng.integers(c, size=k - c)]
                break
            pick = rng.choice(n, p=closest / total)
            centroids[c] = points[pick]
            closest = np.minimum(closest, _squared_distances(points, centroids[c:c + 1])[:, 0])
    for _ in range(iterations):
        labels = assign_clusters(points, centroids)
        onehot = np.zeros((len(points), k))
        onehot[np.arange(len(points)), labels] = 1.0
        sums = onehot.T @ points  # per-cluster sums (np.add.at is slow)
        counts = onehot.sum(axis=0)
        updated = centroids.copy()
        filled = counts > 0
        updated[filled] = sums[filled] / counts[filled, None]
        empty = np.flatnonzero(~filled)
        if len(empty):  # re-seed empty clusters on the points farthest from their centroid
            far = _squared_distances(points, updated).min(axis=1).argsort()[::-1]
            updated[empty] = points[np.resize(far, len(empty))]
        shift = float(((updated - centroids) ** 2).sum())
        centroids = updated
        if shift < tolerance:
            break
    return centroids
