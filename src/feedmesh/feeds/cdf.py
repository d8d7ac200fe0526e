"""CDF, Microsoft's Channel Definition Format (1997): ``<CHANNEL HREF=..><ITEM HREF=..>``.

Nobody publishes CDF any more, but it costs little to read and old archives still hold it.
Element and attribute names are upper case; the channel's ``BASE`` attribute plays xml:base.
Only the fields that map onto ours are read: title, abstract (summary), HREF (link) and LASTMOD
(updated).
"""

from __future__ import annotations

from lxml import etree

from feedmesh.feeds.common import Context, EntryDraft
from feedmesh.feeds.urls import scoped_base
from feedmesh.feeds.xmltext import text_of
from feedmesh.model import FeedInfo

__all__ = ["read_cdf"]


def read_cdf(root: etree._Element, ctx: Context) -> tuple[FeedInfo, list[EntryDraft]]:
    base = scoped_base(root.get("BASE"), ctx.base_of(root, ctx.base))
    fields: dict[str, object] = {"format": "cdf"}
    fields["link"] = ctx.url(root.get("HREF", ""), base)
    fields["updated"] = ctx.date(root.get("LASTMOD", ""))
    items: list[etree._Element] = []
    for child in root:
        if child.tag == "TITLE":
            fields["title"] = ctx.title(text_of(child))
        elif child.tag == "ABSTRACT":
            fields["description"] = ctx.html(text_of(child), base)
        elif child.tag == "ITEM":
            items.append(child)
    if len(items) > ctx.limits.max_entries:
        ctx.problems.add("too_large", f"the document has {len(items)} items; kept the first "
                         f"{ctx.limits.max_entries}")
        items = items[:ctx.limits.max_entries]
    drafts = []
    for item in items:
        draft = EntryDraft()
        draft.link = ctx.url(item.get("HREF", ""), base)
        draft.updated = ctx.date(item.get("LASTMOD", ""))
        for child in item:
            if child.tag == "TITLE" and not draft.title:
                draft.title = ctx.title(text_of(child))
            elif child.tag == "ABSTRACT" and not draft.summary:
                draft.summary = ctx.html(text_of(child), base)
        drafts.append(draft)
    clean = {name: value for name, value in fields.items() if value is not None and value != ""}
    return FeedInfo(**clean), drafts
