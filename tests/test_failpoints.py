"""The failpoints' switch: read from the environment, refused clearly when malformed."""

from __future__ import annotations

import logging

import pytest

from feedmesh import failpoints
from feedmesh.failpoints import ENVIRONMENT, FailpointError, armed


def test_names_and_pauses_are_read():
    assert armed("") == {}
    assert armed(" filter.snapshot_mapped=60 , reflector.checkpoint_written=0.5,") == {
        "filter.snapshot_mapped": 60.0, "reflector.checkpoint_written": 0.5}


@pytest.mark.parametrize("spec", ["filter.snapshot_mapped", "=3", "x=soon", "x=-1", "x=7200"])
def test_a_malformed_spec_says_which_part(spec):
    with pytest.raises(FailpointError, match=rf"{ENVIRONMENT}: .* is not NAME=SECONDS"):
        armed(spec)


def test_a_malformed_environment_is_logged_and_arms_nothing(monkeypatch, caplog):
    monkeypatch.setenv(ENVIRONMENT, "x=soon")
    monkeypatch.setattr(failpoints, "_armed", None)
    with caplog.at_level(logging.ERROR, logger="feedmesh.failpoints"):
        failpoints.reached("x")  # returns at once: nothing is armed
    assert "failpoints_ignored" in caplog.text and "'x=soon'" in caplog.text


def test_an_armed_point_pauses_and_says_so(monkeypatch, caplog):
    monkeypatch.setenv(ENVIRONMENT, "here=0")
    monkeypatch.setattr(failpoints, "_armed", None)
    with caplog.at_level(logging.WARNING, logger="feedmesh.failpoints"):
        failpoints.reached("elsewhere")
        assert caplog.text == ""
        failpoints.reached("here")
    assert "failpoint_reached name=here pause_s=0.0" in caplog.text
