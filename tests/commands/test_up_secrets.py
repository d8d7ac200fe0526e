"""compose/up_secrets.py, the parts `up` uses without running: a --store URL's password moved to a
passfile (and the URL still connects, on a real server), the credentials made 0600 once and
kept, and a republishing crawler's key allowed its own group of articles and no other."""

from __future__ import annotations

import stat
from urllib.parse import urlsplit

import psycopg

from feedmesh.bus.nats_auth import role_permissions
from feedmesh.compose.up_secrets import hub_groups, lock_up, url_without_password
from tests.postgres import postgres_server, postgres_url, with_password  # noqa: F401


def test_a_store_urls_password_goes_to_a_passfile_and_the_url_still_connects(
        postgres_url, tmp_path):  # noqa: F811 - the fixture
    given = with_password(postgres_url)  # as an operator might give it
    password = urlsplit(given).password
    assert password, "the tests' server is reached with a password"
    url = url_without_password(given, tmp_path / "secrets" / "store.pgpass")
    assert password not in url and "passfile=" in url
    passfile = tmp_path / "secrets" / "store.pgpass"
    assert stat.S_IMODE(passfile.stat().st_mode) == 0o600
    with psycopg.connect(url, connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    plain = "postgresql://app@127.0.0.1:5432/feedmesh?passfile=/x"
    assert url_without_password(plain, tmp_path / "unused") == plain
    assert not (tmp_path / "unused").exists()


def test_the_credentials_are_made_once_closed_to_others_and_kept(tmp_path):
    first = lock_up(tmp_path)
    token = first.token_file.read_bytes()
    seed = first.nats.path("crawler").read_bytes()
    again = lock_up(tmp_path)
    assert again.token_file.read_bytes() == token
    assert again.nats.path("crawler").read_bytes() == seed
    assert stat.S_IMODE((tmp_path / "secrets").stat().st_mode) == 0o700
    for path in (first.token_file, *(first.nats.path(r) for r in first.nats.public_keys)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert first.flags("filter") == ["--bus-credentials", str(first.nats.path("filter"))]
    assert first.flags("web", authenticated_bus=False) == [
        "--reflector-token-file", str(first.token_file)]
    assert "--token-file" in first.flags("reflector")


def test_a_republishing_crawler_pulls_its_own_group_of_articles_and_no_other():
    groups = hub_groups(filters=2, reflectors=1, crawlers=[0, "crawler-1"], republish=True)
    assert ("articles", "republish-crawler-0") in groups
    assert ("articles", "republish-crawler-crawler-1") in groups
    assert ("feeds", "crawler-crawler-1") in groups and ("articles", "filter-1") in groups
    allowed = role_permissions("crawler", "fm", 1, "U" + "A" * 55,
                               [("articles", "republish-crawler-0")])["publish"]["allow"]
    assert "$JS.API.CONSUMER.MSG.NEXT.fm_articles.republish-crawler-0" in allowed
    assert not any(a.startswith("$JS.API.CONSUMER.MSG.NEXT.fm_articles.filter") or
                   a == "$JS.API.CONSUMER.MSG.NEXT.fm_articles.*" for a in allowed)
    plain = role_permissions("crawler", "fm", 1, "U" + "A" * 55)["publish"]["allow"]
    assert not any("MSG.NEXT.fm_articles" in a for a in plain)
