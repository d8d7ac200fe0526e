// The npm `pubsubhubbub` package's subscriber (andris9/pubsubhubbub), driven from
// tests/hub/web/test_websub_npm.py: listen on HOST:PORT, subscribe to TOPIC at HUB, and print
// one JSON line per event ("listening", "subscribe" when the hub verified intent, "feed" with
// the delivered body, "denied" / "error"). Runs until killed.
"use strict";
const pubsubhubbub = require("pubsubhubbub");
const [hub, topic, host, port] = process.argv.slice(2);
const say = (event, data) => process.stdout.write(JSON.stringify({ event, ...data }) + "\n");
const subscriber = pubsubhubbub.createServer({ callbackUrl: `http://${host}:${port}/callback` });
subscriber.on("listen", () => {
  say("listening", {});
  subscriber.subscribe(topic, hub, (error) => { if (error) say("denied", { error: String(error) }); });
});
subscriber.on("subscribe", (data) => say("subscribe", { topic: data.topic, lease: data.lease }));
subscriber.on("denied", (data) => say("denied", { error: String(data.error) }));
subscriber.on("error", (error) => say("error", { error: String(error) }));
subscriber.on("feed", (data) => say("feed", { topic: data.topic, hub: data.hub,
                                              type: data.headers["content-type"],
                                              feed: data.feed.toString("utf-8") }));
subscriber.listen(Number(port), host);
