"""``feedmesh parse``: files, standard input and URLs (a real HTTP server on loopback)."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from feedmesh.cli import main

FEED = (b"<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel><title>CLI</title>"
        b"<link>/home</link><item><title>One</title><link>/posts/1</link><guid>g1</guid>"
        b"<pubDate>Mon, 04 Mar 2024 10:00:00 GMT</pubDate></item></channel></rss>")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    status = main(["parse", *argv])
    captured = capsys.readouterr()
    document = json.loads(captured.out) if captured.out.strip() else None
    return status, document, captured.err


def test_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "feed.xml"
    path.write_bytes(FEED)
    status, document, err = run(capsys, str(path), "--base-url", "http://cli.test/feed.xml")
    assert status == 0 and err == ""
    assert document["feed"]["title"] == "CLI"
    assert document["feed"]["link"] == "http://cli.test/home"
    entry = document["entries"][0]
    assert entry["key"] == "g1" and entry["link"] == "http://cli.test/posts/1"
    assert entry["published"] == "2024-03-04T10:00:00Z"
    assert "error" not in document


def test_stdin_with_recoverable_problem(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    broken = FEED.replace(b"</channel></rss>", b"")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(broken)))
    status, document, _ = run(capsys, "-")
    assert status == 0
    assert document["error"]["kind"] == "malformed"
    assert document["error"]["line"] == 1
    assert document["entries"][0]["title"] == "One"


def test_not_a_feed_exits_2_with_the_reason(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "page.html"
    page.write_bytes(b"<!DOCTYPE html><html><body>hello</body></html>")
    status, document, err = run(capsys, str(page))
    assert status == 2
    assert document["error"]["kind"] == "not_a_feed"
    assert "is not a feed: an HTML page" in err


def test_forbidden_document_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "xxe.xml"
    path.write_bytes(b'<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><rss>&x;</rss>')
    status, document, err = run(capsys, str(path))
    assert status == 2 and document["error"]["kind"] == "forbidden"
    assert "entities" in err


def test_missing_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, document, err = run(capsys, str(tmp_path / "nope.xml"))
    assert status == 1 and document is None
    assert "is neither a file nor an http(s) URL" in err and "nope.xml" in err


def test_a_url_without_its_scheme_is_named_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    status, document, err = run(capsys, "example.org/feed.xml")
    assert status == 1 and document is None
    assert err.strip() == ("feedmesh parse: 'example.org/feed.xml' is neither a file nor an "
                           "http(s) URL (a URL starts with http:// or https://)")


def test_an_unreadable_file_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, str(tmp_path))  # a folder: it exists, and cannot be read
    assert status == 1 and "cannot read" in err and "directory" in err.lower()


class _FeedServer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/moved":
            self.send_response(301)
            self.send_header("Location", "/blog/feed.xml")
            self.end_headers()
            return
        body = FEED if self.path == "/blog/feed.xml" else b"<html><body>404</body></html>"
        self.send_response(200 if self.path == "/blog/feed.xml" else 404)
        self.send_header("Content-Type", "application/rss+xml; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FeedServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_url_is_fetched_and_its_final_url_is_the_base(
        server: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("feedmesh.fetch", reason="the fetch package is not in this build")
    status, document, err = run(capsys, f"{server}/moved", "--allow-network", "127.0.0.0/8")
    assert status == 0, err
    assert document["feed"]["title"] == "CLI"
    assert document["entries"][0]["link"] == f"{server}/posts/1"


def test_url_on_a_private_address_is_refused_by_default(
        server: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("feedmesh.fetch", reason="the fetch package is not in this build")
    status, document, err = run(capsys, f"{server}/blog/feed.xml")
    assert status == 1 and document is None
    assert "could not fetch" in err and "loopback address" in err
    assert "--allow-network CIDR" in err and "allow_networks" not in err  # the flag, not Python


def test_url_that_fails_exits_1(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("feedmesh.fetch", reason="the fetch package is not in this build")
    status, _, err = run(capsys, f"{server}/missing", "--allow-network", "127.0.0.0/8")
    assert status == 1 and "could not fetch" in err
