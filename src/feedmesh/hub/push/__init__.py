"""Push: the WebSub hub of every private feed, and webhooks, on one delivery worker
(:mod:`.service`), its HTTP client (:mod:`.http`) and what it sends (:mod:`.messages`)."""

from feedmesh.hub.push.service import PrivateFeeds, PushService, PushSettings, TopicKeys

__all__ = ["PrivateFeeds", "PushService", "PushSettings", "TopicKeys"]
