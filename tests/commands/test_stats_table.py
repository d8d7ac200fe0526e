"""`feedmesh stats` against one hub: the table an operator reads."""

from __future__ import annotations

from rich.console import Console

from feedmesh.commands.stats import stats_table


def render(stats: dict) -> str:
    console = Console(record=True, width=200)
    console.print(stats_table(stats))
    return console.export_text()


def stats_of(**overrides) -> dict:
    stats = {"feeds": 18, "subscriptions": 3, "entries_stored": 40,
             "last_crawl": {"fetched": 15, "not_modified": 2, "new_entries": 7, "elapsed_s": 1.5},
             "crawl_cycles": 4, "hosts_paused": {}, "queues": {}, "metrics": {}}
    stats.update(overrides)
    return stats


def test_paused_hosts_are_named_and_many_are_counted():
    assert "hosts paused" not in render(stats_of())
    assert "hosts paused" not in render(stats_of(hosts_paused=None))  # a web process
    text = render(stats_of(hosts_paused={"b.example": 2.0, "a.example": 1.0}))
    assert "2 (cannot be reached): a.example, b.example" in text
    many = {f"h{i:02d}.example": 1.0 for i in range(12)}
    text = render(stats_of(hosts_paused=many))
    assert "12 (cannot be reached): h00.example, h01.example, h02.example, h03.example, " \
        "h04.example and 7 more" in text
