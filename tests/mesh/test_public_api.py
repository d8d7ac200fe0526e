"""What a transport, the peer and the CLI may rely on: the names the mesh's front doors export."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "feedmesh.mesh.records", "feedmesh.mesh.records.canonical", "feedmesh.mesh.records.record",
    "feedmesh.mesh.records.log", "feedmesh.mesh.overlay", "feedmesh.mesh.overlay.ids",
    "feedmesh.mesh.overlay.messages", "feedmesh.mesh.overlay.tables",
    "feedmesh.mesh.overlay.pastry", "feedmesh.mesh.overlay.scribe", "feedmesh.mesh.overlay.sim",
    "feedmesh.mesh.overlay.scenario", "feedmesh.mesh.peer", "feedmesh.mesh.peer.multicast",
    "feedmesh.mesh.peer.trust", "feedmesh.mesh.overlay.wire", "feedmesh.mesh.transport.wheel",
    "feedmesh.mesh.transport.driver", "feedmesh.mesh.sansio", "feedmesh.mesh.sansio.dialect",
    "feedmesh.mesh.sansio.timers", "feedmesh.mesh.sansio.simulator",
    "feedmesh.mesh.transport.fleet",
]


@pytest.mark.parametrize("module", MODULES)
def test_every_exported_name_exists(module: str) -> None:
    imported = importlib.import_module(module)
    for name in imported.__all__:
        assert getattr(imported, name) is not None, f"{module}.{name}"


def test_front_doors() -> None:
    records = importlib.import_module("feedmesh.mesh.records")
    overlay = importlib.import_module("feedmesh.mesh.overlay")
    assert {"FeedWriter", "FeedLog", "Verdict", "InvalidRecord", "open_record"} <= set(
        records.__all__)
    assert {"ScribeNode", "PastryNode", "Simulator", "Handle", "group_id"} <= set(overlay.__all__)
    assert issubclass(records.InvalidRecord, ValueError)
