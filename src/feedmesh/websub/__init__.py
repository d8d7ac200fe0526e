"""WebSub (W3C Recommendation, 2018-01-23): the protocol's pure parts.

Both directions of push use these: the subscriber (publishers' hubs push to us) and the hub for
personalized feeds (we push to readers). Nothing here touches a socket, a file or a clock; the
aiohttp edges live in the hub's web tier and the crawler.

* :mod:`.signature`: ``X-Hub-Signature``, signed and checked (sha1 .. sha512);
* :mod:`.discovery`: the hubs and the topic a fetched document advertises;
* :mod:`.lease`: one push subscription's life (subscribe, verify, renew, deny, unsubscribe);
* :mod:`.subscriber`: every subscription of a hub: what to send when, how to answer callbacks.
"""
