"""The address guard judges every form an address can take, table-driven: an IPv6 address that
carries a forbidden IPv4 one is refused as that IPv4 address would be."""

from __future__ import annotations

import pytest

from feedmesh.fetch import AddressGuard

CASES = [
    # (address, refusal: None when it may be contacted, else a text the reason contains)
    ("8.8.8.8", None),
    ("10.0.0.1", "private"),
    ("127.0.0.1", "loopback"),
    ("169.254.169.254", "cloud metadata"),
    ("100.64.0.1", "CGNAT"),
    ("2606:4700::1111", None),
    ("::1", "loopback"),
    ("fd00::1", "private"),
    ("::ffff:127.0.0.1", "loopback"),                               # IPv4-mapped
    ("::ffff:8.8.8.8", None),
    ("64:ff9b::a00:1", "private (NAT64 10.0.0.1)"),                 # NAT64, RFC 6052
    ("64:ff9b::808:808", None),
    ("2002:a00:1::1", "private (6to4 10.0.0.1)"),                   # 6to4, RFC 3056
    ("2002:7f00:1::", "loopback (6to4 127.0.0.1)"),
    ("2002:a9fe:a9fe::1", "cloud metadata (6to4 169.254.169.254)"),
    ("2002:808:808::1", None),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private (Teredo 10.0.0.1)"),  # RFC 4380
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback (Teredo 127.0.0.1)"),
]


@pytest.mark.parametrize("address, refused", CASES, ids=[c[0] for c in CASES])
def test_each_form_is_judged_as_the_address_it_reaches(address, refused):
    reason = AddressGuard().refusal(address)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason, reason


def test_an_allowed_block_allows_its_wrapped_forms_too():
    guard = AddressGuard(allow_networks=("127.0.0.0/8",))
    assert guard.refusal("127.0.0.1") is None
    assert guard.refusal("::ffff:127.0.0.1") is None
    assert guard.refusal("10.0.0.1") == "private"
