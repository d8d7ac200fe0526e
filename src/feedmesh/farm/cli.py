"""``feedmesh farm``: serve synthetic feeds on loopback until interrupted.

    feedmesh farm --feeds 1000 --port 8080 --seed 7 [--speed 60] [--hosts 4] [--faults none]
                  [--geography wan3|FILE.json --client 127.0.1.2=eu ...]

Prints where it serves (and, with ``--ready-json``, one JSON line on stdout that
:class:`feedmesh.farm.process.FarmProcess` waits for). SIGTERM or Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import sys
import time

from feedmesh import runloop

__all__ = ["configure", "run"]


def _override(text: str) -> tuple[int, str]:
    feed, eq, fault = text.partition("=")
    if not eq or not feed.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected FEED_ID=FAULT, got {text!r}")
    return int(feed), fault.strip()


def _placement(text: str) -> tuple[str, str]:
    address, eq, region = text.partition("=")
    if not eq or not address.strip() or not region.strip():
        raise argparse.ArgumentTypeError(f"expected ADDRESS=REGION, got {text!r}")
    return address.strip(), region.strip()


def _geography(spec: str | None, clients: list[tuple[str, str]]):
    """The Geography that --geography and --client describe (None without --geography)."""
    import msgspec

    from feedmesh.farm.geography import Geography

    if spec is None:
        if clients:
            raise ValueError("--client places a client in a region of --geography; "
                             "give --geography")
        return None
    if spec == "wan3":
        geography = Geography()
    else:
        try:
            with open(spec, "rb") as file:
                geography = msgspec.json.decode(file.read(), type=Geography)
        except OSError as error:
            raise ValueError(f"--geography {spec}: cannot read it: {error.strerror}") from error
        except (msgspec.ValidationError, msgspec.DecodeError) as error:
            raise ValueError(f"--geography {spec}: not a geography: {error}") from error
    if clients:
        geography = msgspec.structs.replace(geography, clients={**geography.clients,
                                                                **dict(clients)})
    return geography


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feeds", type=int, default=100, help="number of feeds (default 100)")
    parser.add_argument("--port", type=int, default=8080, help="port on every host (0: any free)")
    parser.add_argument("--seed", type=int, default=1, help="everything served follows from it")
    parser.add_argument("--speed", type=float, default=1.0,
                        help="farm clock runs this many times faster than real time")
    parser.add_argument("--origin", type=float, default=None,
                        help="farm time at start, Unix seconds (default: now); fix it to replay")
    parser.add_argument("--hosts", type=int, default=1,
                        help="spread feeds over this many loopback addresses 127.0.1.1..K")
    parser.add_argument("--faults", default="default",
                        help="fault mix: default, none, or KIND=SHARE,... "
                             "(see feedmesh.farm.faults)")
    parser.add_argument("--fault", action="append", type=_override, default=[], metavar="ID=KIND",
                        help="give feed ID exactly this fault (repeatable)")
    parser.add_argument("--geography", default=None, metavar="wan3|FILE.json",
                        help="emulate wide-area delays: wan3 (three regions, 20-250 ms round "
                             "trips) or a JSON file of feedmesh.farm.geography.Geography")
    parser.add_argument("--client", action="append", type=_placement, default=[],
                        metavar="ADDR=REGION",
                        help="a client source address and its region "
                             "(repeatable; with --geography)")
    parser.add_argument("--cache-mb", type=float, default=1024.0,
                        help="memory budget for rendered documents (default 1024)")
    parser.add_argument("--log-capacity", type=int, default=200_000,
                        help="requests kept in the request log")
    parser.add_argument("--prerender", action="store_true",
                        help="render every document before serving (~0.5 ms per feed)")
    parser.add_argument("--config-json", default=None, metavar="JSON",
                        help="a whole FarmConfig as JSON (overrides the options above; used by "
                             "FarmProcess so that every setting reaches the child)")
    parser.add_argument("--ready-json", action="store_true",
                        help="print one JSON line with the URLs on stdout once serving")


def run(args: argparse.Namespace) -> int:
    import msgspec

    from feedmesh.farm.config import FarmConfig

    try:
        if args.config_json:
            config = msgspec.json.decode(args.config_json, type=FarmConfig)
        else:
            config = FarmConfig(feeds=args.feeds, port=args.port, seed=args.seed,
                                speed=args.speed, origin=args.origin, hosts=args.hosts,
                                faults=args.faults, fault_overrides=dict(args.fault),
                                cache_mb=args.cache_mb, log_capacity=args.log_capacity,
                                prerender=args.prerender,
                                geography=_geography(args.geography, args.client))
    except (ValueError, msgspec.ValidationError, msgspec.DecodeError) as error:
        print(f"feedmesh farm: {error}", file=sys.stderr)
        return 2
    try:
        runloop.run(_serve(config, args.ready_json))
    except OSError as error:
        print(f"feedmesh farm: cannot serve: {error.strerror or error}", file=sys.stderr)
        return 2
    return 0


FREEZE_INTERVAL_S = 5.0


async def _freeze_survivors(stop: asyncio.Event) -> None:
    """Keep what the farm has built out of the interpreter's full collections.

    A farm process holds a growing heap of long-lived objects (rendered documents, the request
    log) and almost no cyclic garbage. CPython's full collections walk all of it, and while one
    runs every feed of the farm stops answering at once: with 100,000 feeds at 417 requests/s,
    full collections grew from 40 to 490 ms within 100 s, and the hub saw 1.5 s with no
    response every ~45 s, then a burst of 500 new articles. Every few seconds, what survived is
    moved out of the collector's reach (``gc.freeze``); objects still die by reference count.
    Only this standalone process does it: a farm inside a test process leaves that process's
    collector alone."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), FREEZE_INTERVAL_S)
        except TimeoutError:
            gc.freeze()


async def _serve(config, ready_json: bool) -> None:
    from feedmesh.farm.server import FarmServer

    started = time.perf_counter()
    farm = FarmServer(config)
    await farm.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    startup = time.perf_counter() - started
    if ready_json:
        print(json.dumps({"event": "ready", "port": farm.port, "base_urls": farm.base_urls,
                          "opml_url": farm.opml_url, "origin": farm.origin,
                          "feeds": config.feeds, "startup_s": round(startup, 4)}), flush=True)
    print(f"farm: {config.feeds} feeds (seed {config.seed}, speed {config.speed}x) on "
          f"{', '.join(farm.base_urls)}; list: {farm.opml_url}; started in {startup:.2f}s",
          file=sys.stderr, flush=True)
    freezer = asyncio.create_task(_freeze_survivors(stop))
    try:
        await stop.wait()
    finally:
        freezer.cancel()
        await farm.stop()
        print(f"farm: stopped after {farm.log.next_seq} requests", file=sys.stderr, flush=True)
