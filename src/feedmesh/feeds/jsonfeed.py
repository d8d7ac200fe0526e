"""JSON Feed 1.0 and 1.1 (https://jsonfeed.org/version/1.1).

A JSON document is a JSON Feed when its top level is an object whose ``version`` starts with
``https://jsonfeed.org/version/`` (or, leniently, one with an ``items`` list and a ``title``);
any other JSON is ``not_a_feed``. Values of the wrong type are skipped field by field rather
than failing the document: ``"id": 123`` becomes ``"123"`` (1.1 says ids are strings, real feeds
disagree), a string where an object belongs is ignored.

Field choices: ``content_html`` over ``content_text``; ``summary`` as the summary; ``url``, else
``external_url``, as the link; ``authors`` (1.1) and ``author`` (1.0), merged, at feed and item
level, items inheriting the feed's; ``tags`` as categories; ``attachments`` as enclosures;
``language`` (1.1) at feed and item level; ``hubs`` for WebSub.
"""

from __future__ import annotations

from typing import Any

from feedmesh.feeds.common import Context, EntryDraft
from feedmesh.feeds.subscribe import read_json_subscribe
from feedmesh.model import FeedInfo, Person

__all__ = ["is_json_feed", "read_json_feed"]

def is_json_feed(document: object) -> bool:
    if not isinstance(document, dict):
        return False
    version = document.get("version")
    if isinstance(version, str) and version.startswith(("https://jsonfeed.org/version/",
                                                         "http://jsonfeed.org/version/")):
        return True
    return isinstance(document.get("items"), list) and isinstance(document.get("title"), str)


def read_json_feed(document: dict[str, Any], ctx: Context) -> tuple[FeedInfo, list[EntryDraft]]:
    version = _string(document.get("version"))
    fields: dict[str, object] = {"format": "json1.1" if version.endswith("/1.1") else "json1.0"}
    base = ctx.url(_string(document.get("feed_url"))) or ctx.base
    home = ctx.url(_string(document.get("home_page_url")), base)
    if home:
        fields["link"] = home
    fields["title"] = ctx.title(_string(document.get("title")), False)
    description = _string(document.get("description"))
    if description:
        fields["description"] = ctx.plain_as_html(description)
    language = ctx.text(_string(document.get("language")))[:35]
    if language:
        fields["language"] = language
    feed_url = ctx.url(_string(document.get("feed_url")), base)
    if feed_url:
        fields["self_link"] = feed_url
    icon = _string(document.get("icon")) or _string(document.get("favicon"))
    if icon:
        fields["icon"] = ctx.url(icon, base)
    authors = _people(document, ctx, base)
    if authors:
        fields["authors"] = tuple(authors)
    hubs = []
    for hub in _list(document.get("hubs")):
        if isinstance(hub, dict):
            url = ctx.url(_string(hub.get("url")), base)
            if url and url not in hubs:
                hubs.append(url)
    if hubs:
        fields["hub_links"] = tuple(hubs)
    fields["subscribe"] = read_json_subscribe(document.get("_feedmesh"), ctx.problems.warn)

    items = [item for item in _list(document.get("items")) if isinstance(item, dict)]
    limit = ctx.limits.max_entries
    if len(items) > limit:
        ctx.problems.add("too_large", f"the document has {len(items)} items; kept the first "
                         f"{limit}")
        items = items[:limit]
    drafts = [_item(item, ctx, base, language, authors) for item in items]
    clean = {name: value for name, value in fields.items() if value is not None and value != ""}
    return FeedInfo(**clean), drafts


def _item(item: dict[str, Any], ctx: Context, base: str, language: str,
          feed_authors: list[Person]) -> EntryDraft:
    draft = EntryDraft()
    identifier = item.get("id")
    if isinstance(identifier, (int, float)) and not isinstance(identifier, bool):
        identifier = str(identifier)
    draft.guid = ctx.text(_string(identifier), "an id")
    draft.link = (ctx.url(_string(item.get("url")), base)
                  or ctx.url(_string(item.get("external_url")), base))
    draft.title = ctx.title(_string(item.get("title")), False)
    content_html = _string(item.get("content_html"))
    if content_html:
        draft.content = ctx.html(content_html, base, "content_html")
    else:
        draft.content = ctx.plain_as_html(_string(item.get("content_text")), "content_text")
    summary = _string(item.get("summary"))
    if summary:
        draft.summary = ctx.plain_as_html(summary, "a summary")
    draft.published = ctx.date(_string(item.get("date_published")))
    draft.updated = ctx.date(_string(item.get("date_modified")))
    draft.authors = _people(item, ctx, base) or list(feed_authors)
    for tag in _list(item.get("tags")):
        if isinstance(tag, str):
            draft.add_category(tag)
    for attachment in _list(item.get("attachments")):
        if isinstance(attachment, dict):
            length = attachment.get("size_in_bytes")
            draft.add_enclosure(ctx.enclosure(
                _string(attachment.get("url")), _string(attachment.get("mime_type")),
                str(length) if isinstance(length, int) and not isinstance(length, bool) else "",
                base))
    draft.language = ctx.text(_string(item.get("language")))[:35] or language
    return draft


def _people(holder: dict[str, Any], ctx: Context, base: str) -> list[Person]:
    people: list[Person] = []
    candidates = [*_list(holder.get("authors")), holder.get("author")]  # 1.1 and 1.0 spellings
    for candidate in candidates:
        if not isinstance(candidate, dict):
            continue
        name = ctx.text(_string(candidate.get("name")), "an author name")
        uri = ctx.url(_string(candidate.get("url")), base)
        if not (name or uri):
            continue
        email = ""
        if uri.startswith("mailto:"):
            email, uri = uri[len("mailto:"):], ""
        person = Person(name=name, email=email, uri=uri)
        if person not in people:
            people.append(person)
    return people


def _string(value: object) -> str:
    return value if isinstance(value, str) else ""


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
