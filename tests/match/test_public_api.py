"""What other packages may rely on: the names each front door exports."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import feedmesh.match


@pytest.mark.parametrize(
    "module",
    ["feedmesh.match", "feedmesh.match.query", "feedmesh.match.index", "feedmesh.match.workload",
     "feedmesh.match.text", "feedmesh.match.article", "feedmesh.match.errors"],
)
def test_every_exported_name_exists(module: str) -> None:
    imported = importlib.import_module(module)
    for name in imported.__all__:
        assert getattr(imported, name) is not None, f"{module}.{name}"


def test_front_door() -> None:
    assert set(feedmesh.match.__all__) >= {
        "Article", "article_from_entry", "parse_query", "Query", "QueryError", "QueryLimits",
        "SubscriptionIndex", "IndexSettings", "IndexSnapshotError", "SubscriptionIdError",
    }
    assert issubclass(feedmesh.match.QueryError, ValueError)
    assert issubclass(feedmesh.match.QueryError, feedmesh.match.MatchError)


def test_parsing_a_query_does_not_import_numba() -> None:
    code = "import sys, feedmesh.match as m; m.parse_query('law'); print('numba' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


def test_everything_works_without_numba() -> None:
    code = """
import sys
sys.modules["numba"] = None  # as if the [fast] extra were not installed
from feedmesh.match import Article, SubscriptionIndex
index = SubscriptionIndex.build([(1, "law internet"), (2, '"net neutrality" -spam'), (3, "copyr*")])
index.add(4, "internet")
found = index.match(Article(text="Net neutrality: law of the internet, copyright"))
print(index.backend, found.tolist())
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "numpy [1, 2, 3, 4]"
