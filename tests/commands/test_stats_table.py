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


def test_topology_rates_come_from_a_real_metrics_endpoint_and_a_trickle_is_not_zero(
        tmp_path, capsys):
    """`stats --up` read in/s over 1 s and showed whole numbers: a filter taking an article every
    two seconds read 0. Over --interval, with a decimal, it reads 0.5."""
    import http.server
    import json
    import os
    import threading

    from feedmesh import cli

    reads = []

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # http.server calls it by this name
            reads.append(1)
            total = 100 + len(reads)  # one more article between two reads
            body = ("# TYPE feedmesh_tier_articles_in_total counter\n"
                    f'feedmesh_tier_articles_in_total{{tier="filter"}} {total}\n').encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        listing = {"web": "http://127.0.0.1:1", "processes": [{
            "role": "filter", "shard": "0/1", "pid": os.getpid(), "state": "running",
            "restarts": 0, "metrics": f"http://127.0.0.1:{server.server_port}/metrics"}]}
        (tmp_path / "up.json").write_text(json.dumps(listing))
        assert cli.main(["stats", "--up", str(tmp_path), "--interval", "2", "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        assert 0.4 <= row["articles_in_per_s"] <= 0.5 and row["articles_in_total"] == 102
        assert cli.main(["stats", "--up", str(tmp_path), "--interval", "2"]) == 0
        shown = capsys.readouterr().out.split("\n")[2].split()
        assert shown[0] == "filter" and shown[-2] in ("0.4", "0.5"), shown
        assert cli.main(["stats", "--up", str(tmp_path), "--interval", "0"]) == 2
        assert "--interval 0" in capsys.readouterr().err
    finally:
        server.shutdown()
