"""What feedmesh.feeds promises to other packages (the names and their signatures)."""

from __future__ import annotations

import inspect

import feedmesh.feeds as feeds
from feedmesh.model import ParsedFeed


def test_exports() -> None:
    assert sorted(feeds.__all__) == ["DEFAULT_LIMITS", "ParseLimits", "content_hash",
                                     "entry_key", "parse_date", "parse_feed"]
    for name in feeds.__all__:
        assert getattr(feeds, name) is not None


def test_parse_feed_signature() -> None:
    signature = inspect.signature(feeds.parse_feed)
    assert list(signature.parameters) == ["data", "url", "content_type", "limits"]
    for name in ("url", "content_type", "limits"):
        assert signature.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
    assert isinstance(feeds.parse_feed(b"<rss/>"), ParsedFeed)


def test_limits_are_frozen_and_defaulted() -> None:
    limits = feeds.ParseLimits(max_entries=5)
    assert limits.max_bytes == feeds.DEFAULT_LIMITS.max_bytes
    try:
        limits.max_entries = 6  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("ParseLimits must be immutable")


def test_modules_declare_their_public_names() -> None:
    import importlib
    import pkgutil

    for module_info in pkgutil.iter_modules(feeds.__path__):
        if module_info.name in ("render", "opml"):  # owned by other packages' authors
            continue
        module = importlib.import_module(f"feedmesh.feeds.{module_info.name}")
        assert module.__doc__, module_info.name
        assert hasattr(module, "__all__"), module_info.name
