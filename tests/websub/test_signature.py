import hashlib
import hmac

import pytest

from feedmesh.websub.signature import METHODS, SignatureError, sign, verify

BODY = b"<feed>new entry</feed>"


@pytest.mark.parametrize("method", METHODS)
def test_sign_matches_an_independent_hmac_and_verifies(method):
    header = sign("s3cret", BODY, method)
    assert header == f"{method}=" + hmac.new(b"s3cret", BODY, getattr(hashlib, method)).hexdigest()
    assert verify("s3cret", BODY, header) == method
    assert verify(b"s3cret", BODY, header.upper().replace(method.upper(), method)) == method


@pytest.mark.parametrize(("header", "why"), [
    (None, "no X-Hub-Signature"),
    ("", "no X-Hub-Signature"),
    ("sha256", "not of the form"),
    ("md5=abcdef", "not one of"),
    ("sha256=" + "0" * 64, "does not match"),
    ("sha256=" + "\u00e9" * 64, "does not match"),  # not a TypeError (a 500 for the sender)
    ("sha256=\udcff", "does not match"),
])
def test_bad_headers_are_refused_with_the_reason(header, why):
    with pytest.raises(SignatureError, match=why):
        verify("s3cret", BODY, header)


def test_a_tampered_body_or_another_secret_is_refused():
    header = sign("s3cret", BODY)
    with pytest.raises(SignatureError, match="does not match"):
        verify("s3cret", BODY + b" ", header)
    with pytest.raises(SignatureError, match="does not match"):
        verify("other", BODY, header)


def test_secrets_must_be_shorter_than_200_bytes_and_not_empty():
    sign("x" * 199, BODY)
    with pytest.raises(SignatureError, match="fewer than 200"):
        sign("x" * 200, BODY)
    with pytest.raises(SignatureError, match="empty"):
        sign("", BODY)
