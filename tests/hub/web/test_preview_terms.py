"""The preview's excerpt centres on a matched term by word, as matching is (issue 33, item 15):
"law" is not in "Flawed", so an entry whose summary starts "Flawed" and says "law" later shows
the part that says "law"."""

from __future__ import annotations

from feedmesh.hub.web.api import _snippet, term_pattern


def marked(text: str, terms: list[str]) -> str:
    pattern = term_pattern(terms)
    assert pattern is not None
    return pattern.sub(lambda m: f"[{m.group(0)}]", text)


def test_terms_are_found_by_word():
    assert marked("Flawed law, lawful", ["law"]) == "Flawed [law], lawful"
    assert marked("A musical; Music", ["music"]) == "A musical; [Music]"
    assert marked("A musical; music", ["music*"]) == "A [musical]; [music]"
    assert marked("New-York and new yorkers", ['"new york"']) == "[New-York] and new yorkers"
    assert marked("東京都に", ["東京"]) == "[東京]都に"
    assert marked("Obama's plan", ["obama"]) == "[Obama]'s plan"
    assert term_pattern(["a"]) is None  # one letter marks nothing (as on the page)


def test_the_excerpt_shows_the_word_not_a_word_containing_it():
    summary = "Flawed " + "filler words here " * 40 + "and then the law itself."
    shown = _snippet(summary, "", ["law"], limit=120)
    assert "the law itself" in shown and not shown.startswith("Flawed")
