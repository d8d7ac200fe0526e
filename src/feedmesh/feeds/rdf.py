"""RSS 1.0 and RSS 0.90: ``<rdf:RDF>`` documents.

The channel and items are siblings under ``rdf:RDF`` (items are not inside the channel); their
fields are those of RSS 2.0 plus Dublin Core, read by :mod:`feedmesh.feeds.rss`. An item's
``rdf:about`` is its URI, the closest thing RSS 1.0 has to a guid, so it is the declared id.
"""

from __future__ import annotations

from lxml import etree

from feedmesh.feeds.common import Context, EntryDraft
from feedmesh.feeds.rss import keyer_for, read_channel, read_items
from feedmesh.feeds.xmltext import language_of, namespace_of
from feedmesh.model import FeedInfo

__all__ = ["read_rdf"]

_RDF_ABOUT = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}about"
_RSS090 = "http://my.netscape.com/rdf/simple/0.9/"


def read_rdf(root: etree._Element, ctx: Context) -> tuple[FeedInfo, list[EntryDraft]]:
    key_of = keyer_for(root)
    base = ctx.base_of(root, ctx.base)
    channel = None
    items: list[etree._Element] = []
    for child in root:
        key = key_of(child.tag)
        if key == "channel" and channel is None:
            channel = child
        elif key == "item":
            items.append(child)
    fields: dict[str, object] = {}
    language = language_of(root, "")
    if channel is not None:
        fields = read_channel(channel, ctx, ctx.base_of(channel, base), key_of)
        items.extend(child for child in channel if key_of(child.tag) == "item")
        language = str(fields.get("language") or language_of(channel, language))
    drafts = read_items(items, ctx, base, language, key_of)
    # Fewer drafts than items when the document had more than the limit: the first ones.
    for item, draft in zip(items, drafts, strict=False):
        about = item.get(_RDF_ABOUT)
        if about and not draft.guid:
            draft.guid = ctx.text(about, "an rdf:about")
            if not draft.link and about.startswith(("http://", "https://")):
                draft.link = ctx.url(about, base)
    rss090 = _RSS090 in root.nsmap.values() or (
        channel is not None and namespace_of(channel.tag) == _RSS090)
    fields["format"] = "rss0.90" if rss090 else "rss1.0"
    return FeedInfo(**fields), drafts
