"""Articles: built from entries, tokenized per field; fields as queries see them."""

from __future__ import annotations

import pytest

from feedmesh.match import Article, article_from_entry, parse_query, tokenize_article
from feedmesh.match.article import language_terms, normalize_host, normalize_language, site_terms
from feedmesh.model import Entry, Person


def test_article_from_entry_strips_markup_and_keeps_fields() -> None:
    entry = Entry(
        key="k",
        title="Net Neutrality &amp; You",
        summary="<p>The <b>F</b>CC voted.</p>",
        content="<div>The <b>F</b>CC voted. Then <a href='x'>more</a>&hellip;</div>",
        authors=(Person(name="Jane Doe"), Person(email="bob@example.com"), Person()),
        categories=("Policy", "Tech"),
        language="",
    )
    article = article_from_entry(entry, "https://www.Example.com:8443/feed.xml",
                                 feed_language="en-US")
    # Titles are plain text; tokens decode entities.
    assert article.title == "Net Neutrality &amp; You"
    assert "FCC voted" in article.text and "<" not in article.text and "\u2026" in article.text
    assert article.text.count("FCC") == 1  # the summary is an excerpt of the content: kept once
    assert article.authors == ("Jane Doe", "bob@example.com")
    assert article.categories == ("Policy", "Tech")
    assert article.site == "www.example.com"
    assert article.language == "en-US"
    assert parse_query('title:"net neutrality" fcc site:example.com lang:en').matches(article)


def test_article_from_entry_with_a_bad_url_has_no_site() -> None:
    article = article_from_entry(Entry(key="k", title="x"), "http://[bad")
    assert article.site == ""


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("NYTimes.com", "nytimes.com"),
        ("www.bbc.co.uk.", "www.bbc.co.uk"),
        ("https://www.bbc.co.uk/news?x=1", "www.bbc.co.uk"),
        ("example.com:8080", "example.com"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("", None),
        ("not a host", None),
        ("-bad-.com", None),
        ("a" * 64 + ".com", None),
        ("http://[bad", None),
    ],
)
def test_normalize_host(text: str, host: str | None) -> None:
    assert normalize_host(text) == host


def test_site_and_language_values() -> None:
    assert site_terms("WWW.BBC.co.uk") == ["www.bbc.co.uk", "bbc.co.uk", "co.uk", "uk"]
    assert site_terms("") == [] and site_terms("no way") == []
    assert language_terms("zh_Hant_TW") == ["zh", "zh-hant", "zh-hant-tw"]
    assert language_terms("english") == [] and normalize_language("e") is None
    assert normalize_language(" PT-br ") == "pt-br"


def test_phrases_do_not_span_fields_authors_or_categories() -> None:
    article = Article(title="alpha", text="beta", authors=("Ann Lee", "Bo Chan"),
                      categories=("a b", "c"))
    tokenized = tokenize_article(article)
    assert tokenized.sequences["text"] == ["alpha", "", "beta"]
    assert not parse_query('"alpha beta"').matches(tokenized)
    assert not parse_query('author:"lee bo"').matches(tokenized)
    assert parse_query('author:"bo chan"').matches(tokenized)
    assert not parse_query('category:"b c"').matches(tokenized)
    assert parse_query("title:alpha").matches(tokenized)
    assert not parse_query("title:beta").matches(tokenized)
    assert parse_query("alpha beta").matches(tokenized)  # unqualified words search title + body


def test_truncation_is_reported() -> None:
    tokenized = tokenize_article(Article(title="t", text="word " * 10), max_chars=20)
    assert tokenized.truncated
    assert len(tokenized.sequences["text"]) < 11
    assert not tokenize_article(Article(text="short")).truncated
