"""RFC 8785 conformance: the RFC's own examples (sections 3.2.2, 3.2.3 and appendix B)."""

from __future__ import annotations

import json
import struct

import pytest

from feedmesh.mesh.records.canonical import NotCanonicalizable, canonical_bytes, is_canonical

# Section 3.2.2 (input as the RFC prints it, output byte for byte)
RFC_INPUT = r'''{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}'''
RFC_OUTPUT = ('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
              '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')

# Appendix B: IEEE-754 bit patterns and their ES6 serialization
NUMBERS = [
    ("0000000000000000", "0"), ("8000000000000000", "0"), ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"), ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"), ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"), ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"), ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"), ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"), ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"), ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"), ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"), ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"), ("43143ff3c1cb0959", "1424953923781206.2"),
]


def test_rfc_example_3_2_2():
    assert canonical_bytes(json.loads(RFC_INPUT)) == RFC_OUTPUT.encode("utf-8")


def test_rfc_sorting_example_3_2_3_sorts_by_utf16_code_units():
    value = json.loads(r'''{"\u20ac": "Euro Sign", "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One",
        "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis"}''')
    keys = list(json.loads(canonical_bytes(value)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


@pytest.mark.parametrize("bits, expected", NUMBERS)
def test_rfc_appendix_b_numbers(bits, expected):
    number = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert canonical_bytes(number) == expected.encode()


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), {1: "non-string key"}, {"x": object()}])
def test_values_without_a_canonical_form_are_refused_with_a_reason(bad):
    with pytest.raises(NotCanonicalizable, match="cannot canonicalize"):
        canonical_bytes(bad)


def test_is_canonical_tells_reserialized_json_from_canonical():
    assert is_canonical(b'{"a":1,"b":[true]}') == (True, {"a": 1, "b": [True]})
    assert is_canonical(b'{"b":[true],"a":1}')[0] is False
    assert is_canonical(b'{"a": 1}')[0] is False
    assert is_canonical(b'\xff') == (False, None)
