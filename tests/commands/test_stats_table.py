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
             "last_crawl": {"fetched": 15, "ok": 12, "delta": 0, "not_modified": 2,
                            "new_entries": 7, "elapsed_s": 1.5,
                            "errors": {"timeout": 1, "parse:malformed": 3}},
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
    assert ("12 (cannot be reached): h00.example, h01.example, h02.example, h03.example, "
            "h04.example and 7 more") in text
    # to anyone but the operator the hub gives a count
    assert "3 (cannot be reached; --operator-token-file names them)" in render(
        stats_of(hosts_paused=3))
    assert "hosts paused" not in render(stats_of(hosts_paused=0))


def test_an_operator_token_file_others_can_read_is_refused(tmp_path, capsys):
    from feedmesh import cli

    token = tmp_path / "operator-token"
    token.write_text("x" * 43)
    token.chmod(0o644)
    assert cli.main(["stats", "--url", "http://127.0.0.1:9", "--operator-token-file",
                     str(token)]) == 2
    err = capsys.readouterr().err
    assert "others may read it" in err and "Traceback" not in err and "x" * 43 not in err


def test_what_a_crawl_fetched_adds_up():
    text = render(stats_of(crawl_mode="interval"))
    # 15 fetched = 12 documents (3 of them broken) + 2 not modified + 1 failed fetch
    assert "15 fetched = 12 documents (3 broken) + 2 not modified (304) + 1 errors" in text
    assert "in 1.5 s" in text


def test_a_scheduled_crawl_shows_its_last_minute_and_a_running_cycle_its_progress():
    scheduled = render(stats_of(crawl_mode="scheduled"))
    assert "crawl, last minute" in scheduled and "last crawl" not in scheduled
    assert "nothing fetched" in render(stats_of(crawl_mode="scheduled", last_crawl=None))
    running = {"fetched": 5, "ok": 5, "delta": 0, "not_modified": 0, "new_entries": 30,
               "errors": {}}
    text = render(stats_of(crawl_mode="interval", last_crawl=None, crawl_running=running))
    assert "crawl running" in text and "5 fetched = 5 documents" in text and "of 18 feeds" \
        in text
