"""Skip the conformance suite cleanly when the corpora are absent, and print the shares."""

from __future__ import annotations

import pytest

from tests.conformance.corpus import CORPUS, available

_COLLECTED = pytest.StashKey[bool]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if "tests/conformance" in str(item.path)]
    config.stash[_COLLECTED] = bool(ours)
    if available():
        return
    skip = pytest.mark.skip(reason=f"conformance corpora not found at {CORPUS} "
                                   "(set FEEDMESH_CONFORMANCE)")
    for item in ours:
        item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not available() or not config.stash.get(_COLLECTED, False):
        return
    from tests.conformance.cases import shares

    terminalreporter.section("feed conformance (share of mappable expectations that agree)")
    for share in shares():
        terminalreporter.write_line(
            f"{share.corpus:22} {share.share:7.2%}  ({share.passed} pass + {share.deliberate} "
            f"verified deliberate of {share.mappable} mappable; {share.known} listed "
            f"differences, {share.failed} failures; {share.unmappable} not mappable; "
            f"strict {share.strict_share:.2%})")
