"""The first pass of an imported list whose feeds all live on one host, under the hub's
scheduled crawl (what ``feedmesh serve --opml`` runs), against a farm on loopback.

The farm runs in its own process and serves ``--feeds`` + 1 feeds on one address; the hub (every
tier in this process, the default schedule and fetch settings but for loopback being allowed)
is given ``--feeds`` of them as the operator's list, then, once half of them were fetched, the
last one as a person adds one by hand. Measured:

* ``first_pass_200_one_host_s``: from the import to the last of its feeds fetched;
* ``hand_added_fetched_after_s``: from the hand-added feed's addition to its fetch;
* ``peak_connections``: the most connections the farm saw open at once from the hub (its count,
  less the connection of the request that reads it);
* ``next_fetch_late_s``: the most that a waiting feed's reported ``next_fetch_at`` lay in the
  past (0: it never did), sampled every 0.1 s.

    .venv/bin/python benchmarks/first_pass.py [--feeds 200]

Last line: JSON with those figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time

from feedmesh.compose.embedded import running_hub
from feedmesh.compose.settings import HubSettings
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.fetch import FetchSettings, StaticResolver


async def measure(feeds: int, timeout_s: float) -> dict:
    config = FarmConfig(feeds=feeds + 1, seed=3, faults="none", hosts=1,
                        origin=1_760_000_000.0)
    with FarmProcess(config) as farm, tempfile.TemporaryDirectory() as tmp:
        settings = HubSettings(data_dir=tmp, fetch=FetchSettings(
            allow_networks=("127.0.0.0/8",)))
        urls = [farm.feed_url(i) for i in range(feeds + 1)]
        async with running_hub(settings, "127.0.0.1", 0,
                               resolver=StaticResolver({})) as (hub, _base):
            crawler = hub.crawler
            began = time.perf_counter()
            ids = await hub.add_feeds(urls[:feeds])
            hand_id: int | None = None
            hand_at = hand_fetched = 0.0
            late = 0.0
            done_at = None
            while time.perf_counter() - began < timeout_s:
                now = crawler.crawler.clock.now()
                fetched = 0
                for fid in ids:
                    state = crawler.fetch_state(fid)
                    if state is not None and state.last_fetched_at:
                        fetched += 1
                        continue
                    due = crawler.next_fetch_at(fid)
                    if due is not None:
                        late = max(late, now - due)
                if hand_id is None and fetched >= feeds // 2:
                    hand_at = time.perf_counter()
                    [hand_id] = await hub.add_feeds(urls[feeds:], operator=False)
                if hand_id is not None and not hand_fetched:
                    state = crawler.fetch_state(hand_id)
                    if state is not None and state.last_fetched_at:
                        hand_fetched = time.perf_counter() - hand_at
                if fetched == feeds and done_at is None:
                    done_at = time.perf_counter() - began
                if done_at is not None and hand_fetched:
                    break
                await asyncio.sleep(0.1)
            # the farm counts the connection of this very request too: one less is the hub's
            peak = max(farm.stats().get("peak_connections", {}).values(), default=1) - 1
    return {"feeds": feeds, "first_pass_200_one_host_s": done_at,
            "hand_added_fetched_after_s": hand_fetched or None, "peak_connections": peak,
            "next_fetch_late_s": round(late, 2), "timeout_s": timeout_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeds", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=1500.0,
                        help="give up after this many seconds (the figure is then null)")
    args = parser.parse_args()
    result = asyncio.run(measure(args.feeds, args.timeout))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
