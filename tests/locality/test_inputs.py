"""Groups, the latency matrix and its JSON form, and the cost of a feed: table-driven."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from feedmesh.locality import (
    FeedLoad,
    HostGroup,
    LatencyMatrix,
    LocalityError,
    cost_matrix,
    fetches_per_cycle,
    group_by_host,
    host_of,
    round_trips,
)


def test_feeds_group_by_server_address_when_known_else_by_host_and_port():
    urls = {"a": "http://blog.example/feed", "b": "https://blog.example/other",
            "c": "http://news.example:8080/rss", "d": "http://mirror.example/feed",
            "e": "http://blog.example:80/atom"}
    assert group_by_host(urls) == [
        HostGroup("blog.example:443", ("b",), "https://blog.example/other"),
        HostGroup("blog.example:80", ("a", "e"), "http://blog.example/feed"),
        HostGroup("mirror.example:80", ("d",), "http://mirror.example/feed"),
        HostGroup("news.example:8080", ("c",), "http://news.example:8080/rss"),
    ]
    # Two names on one server make one group, as Cobra's 102,446 feeds made 591.
    same = group_by_host(urls, {"blog.example": "192.0.2.7", "mirror.example": "192.0.2.7"})
    assert [(g.key, g.feeds) for g in same] == [("192.0.2.7", ("a", "b", "d", "e")),
                                                ("news.example:8080", ("c",))]


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://x.example/feed", r"not an http\(s\) URL with a host"),
    ("http:///feed", r"not an http\(s\) URL with a host"),
    ("http://x.example:99999/feed", "Port out of range"),
])
def test_bad_feed_urls_are_named(url, message):
    with pytest.raises(LocalityError, match=message):
        host_of(url)


def test_a_matrix_round_trips_through_json_and_answers_by_name():
    matrix = LatencyMatrix.from_json(b'{"rtt_ms": {"eu": {"h1": 20, "h2": 250.5},'
                                     b' "na": {"h1": 90, "h2": 160}}}')
    assert matrix.crawlers == ("eu", "na") and matrix.groups == ("h1", "h2")
    assert matrix.rtt_s("eu", "h2") == pytest.approx(0.2505)
    assert np.allclose(matrix.rows(["na"], ["h2", "h1"]), [[0.160, 0.090]])
    again = LatencyMatrix.from_json(matrix.to_json())
    assert np.allclose(again.seconds, matrix.seconds) and again.groups == matrix.groups


@pytest.mark.parametrize(("text", "message"), [
    (b'{"rtt": {}}', "expected .*rtt_ms"),
    (b'{"rtt_ms": {"eu": {"h1": 20}, "na": {"h2": 5}}}', "crawler 'eu' has no latency to .'h2'."),
    (b'{"rtt_ms": {"eu": {"h1": -1}}}', "finite number >= 0"),
    (b'{"rtt_ms": {"eu": {"h1": "fast"}}}', "Expected `float`"),
    (b"not json", "expected"),
])
def test_bad_matrix_files_say_what_is_wrong(text, message):
    with pytest.raises(LocalityError, match=message):
        LatencyMatrix.from_json(text, where="m.json")


@pytest.mark.parametrize(("body_bytes", "rounds"), [
    (0, 1), (14_600, 1), (14_601, 2), (43_800, 2), (43_801, 3), (102_200, 3), (102_201, 4)])
def test_round_trips_follow_slow_start(body_bytes, rounds):
    assert round_trips(body_bytes) == rounds


@pytest.mark.parametrize(("rate_per_day", "fetches"), [(0.0, 1.0), (24.0, 1.0), (96.0, 4.0),
                                                       (1000.0, 8.0)])
def test_polls_a_cycle_follow_the_posting_rate_within_bounds(rate_per_day, fetches):
    assert fetches_per_cycle(rate_per_day, cycle_s=3600.0, max_fetches=8) == fetches


def test_a_feed_costs_its_polls_times_round_trips_times_latency():
    matrix = LatencyMatrix.from_mapping({"near": {"h": 20.0}, "far": {"h": 200.0}})
    loads = [FeedLoad("small", "h", 1.0, 1000), FeedLoad("big", "h", 3.0, 50_000)]
    cost = cost_matrix(loads, ["near", "far"], matrix, overhead_s=0.001)
    assert cost == pytest.approx(np.array([[0.021, 0.201], [3 * (0.020 * 3 + 0.001),
                                                            3 * (0.200 * 3 + 0.001)]]))


def test_group_structs_are_plain_data():
    group = HostGroup("h", ("a",), "http://h/a")
    assert msgspec.json.decode(msgspec.json.encode(group), type=HostGroup) == group
