"""The overlay across processes: 30 endpoints in 2 worker processes (each on its own 127.5.0.x
address and port) and a publisher in this one form one overlay; every subscriber gets every signed
record exactly once, and again after 20% of the nodes (the group's root among them) die at once.
This is ``benchmarks/mesh_scribe.py``'s machinery at a size CI can run."""

from __future__ import annotations

import random

from nacl.signing import SigningKey

from feedmesh.mesh.overlay import group_id
from feedmesh.mesh.records import FeedWriter
from feedmesh.mesh.transport.fleet import Fleet, FleetError, digest, fleet_address, open_publisher
from tests.eventually import eventually

URL = "http://127.5.0.250:8000/feed.xml"
NET = "127.5"


async def test_records_reach_every_endpoint_in_every_worker_and_survive_churn() -> None:
    rng = random.Random(7)
    publisher = await open_publisher(URL, NET)  # never the root: the churn kills the root
    fleet = Fleet(2)
    try:
        hosts = [fleet_address(i, NET) for i in range(1, 30)]
        shares = [hosts[0::2], hosts[1::2]]          # worker w hosts shares[w]
        handles = await fleet.call_all("open", [(share,) for share in shares])
        await publisher.start(None)
        # join one by one through a random earlier node, 50 ms apart
        # endpoint n (1..29) is hosts[n - 1]: worker (n - 1) % 2, its index (n - 1) // 2 there
        everyone = [publisher.handle] + [handles[(n - 1) % 2][(n - 1) // 2] for n in range(1, 30)]
        start = publisher.now() + 0.2
        plans: list[list] = [[], []]
        for n in range(1, 30):
            plans[(n - 1) % 2].append(((n - 1) // 2, start + n * 0.05, everyone[rng.randrange(n)]))
        await fleet.call_all("start", [(plan,) for plan in plans])

        gid = group_id(URL)

        async def status() -> list[dict]:
            return await fleet.call_all("status", [(gid,)] * 2)

        async def all_joined() -> bool:
            return sum(s["joined"] for s in await status()) == 29
        await eventually(all_joined, interval=0.2, timeout=20,
                         what="29 endpoints joined the overlay")

        writer = FeedWriter(SigningKey.generate(), URL)
        now = publisher.now()
        await fleet.call_all("subscribe", [(URL, writer.feed, [(i, now) for i in range(len(s))])
                                           for s in shares])

        async def all_attached() -> bool:
            return sum(s["attached"] for s in await status()) == 29
        await eventually(all_attached, interval=0.2, timeout=20,
                         what="29 subscribers attached to the tree")

        genuine = set()

        def publish() -> None:
            wire = writer.append({"id": f"item-{writer.seq + 1}", "title": "news"})
            genuine.add(digest(wire))
            publisher.publish(URL, writer.seq, wire)

        async def holding(upto: int) -> int:
            return sum(await fleet.call_all("progress", [(upto,)] * 2))

        for _ in range(3):
            publish()

        async def everyone_has_3() -> bool:
            return await holding(3) == 29
        await eventually(everyone_has_3, interval=0.2, timeout=15,
                         what="every subscriber got records 1-3")

        # 20% die at once, the group's root among them
        roots: list[tuple[int, int]] = []

        async def one_root() -> bool:
            roots[:] = [(w, i) for w, s in enumerate(await status()) for i in s["roots"]]
            return len(roots) == 1
        await eventually(one_root, interval=0.2, timeout=10, what="one root for the group")
        others = [(w, i) for w, share in enumerate(shares) for i in range(len(share))
                  if (w, i) not in roots]
        victims = roots + rng.sample(others, 5)
        await fleet.call_all("kill", [([i for v, i in victims if v == w],) for w in range(2)])
        for _ in range(3):
            publish()

        async def survivors_have_6() -> bool:
            return await holding(6) == 29 - len(victims)
        await eventually(survivors_have_6, interval=0.2, timeout=30,
                         what="every live subscriber got records 1-6 after the churn")

        reports = await fleet.call_all("report")
        for report in reports:
            for closed, got in zip(report["closed"], report["deliveries"], strict=True):
                if closed:
                    continue
                assert sorted(seq for seq, *_ in got) == [1, 2, 3, 4, 5, 6]   # each exactly once
                assert {d for *_, d in got} <= genuine
                assert all(at >= start for _, at, _, _ in got)
    finally:
        publisher.close()
        await fleet.close()


async def test_a_failed_command_is_a_fleet_error_naming_it() -> None:
    fleet = Fleet(1)
    try:
        try:
            await fleet.call(0, "kill", [3])        # no endpoint 3 in an empty worker
        except FleetError as error:
            assert "worker 0: kill: IndexError" in str(error)
        else:
            raise AssertionError("no FleetError")
        assert await fleet.call(0, "progress", 1) == 0   # the worker keeps serving
    finally:
        await fleet.close()
