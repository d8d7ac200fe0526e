"""The push settings an operator sets on ``feedmesh serve``: each flag reaches
:class:`~feedmesh.hub.push.service.PushSettings`, flags that do not fit together are refused naming
them, and a real ``feedmesh serve`` on loopback grants the leases its flags bound."""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys

import aiohttp
import pytest

from feedmesh.commands import serve
from feedmesh.commands.flags import push_settings
from feedmesh.hub.push.service import PushSettings
from tests.eventually import eventually
from tests.websub.subscriber import loopback_subscriber


def parsed(*flags: str) -> argparse.Namespace:
    """``feedmesh serve FLAGS`` as the command line reads them."""
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    return parser.parse_args(list(flags))


def test_without_flags_the_settings_are_the_defaults():
    assert push_settings(parsed()) == PushSettings()


def test_each_flag_reaches_its_setting():
    settings = push_settings(parsed(
        "--push-rate", "50", "--push-concurrency", "8", "--push-timeout", "2.5",
        "--push-retries", "3", "--push-retry-first", "0.5", "--push-retry-max", "30",
        "--lease-default", "7200", "--lease-min", "60", "--lease-max", "86400",
        "--websub-per-feed", "7", "--webhooks-per-subscription", "2",
        "--push-verifications", "11", "--websub-signature", "sha1"))
    assert settings.max_deliveries_per_s == 50 and settings.max_in_flight == 8
    assert settings.timeout_s == 2.5
    assert (settings.retry.max_failures, settings.retry.first_delay_s,
            settings.retry.max_delay_s) == (3, 0.5, 30)
    assert (settings.lease.default_s, settings.lease.min_s, settings.lease.max_s) == (
        7200, 60, 86400)
    assert (settings.max_subscribers_per_feed, settings.max_webhooks_per_subscription,
            settings.max_verifications) == (7, 2, 11)
    assert settings.websub_signature == "sha1"


def test_an_unknown_signature_method_is_refused_naming_the_methods(capsys):
    assert PushSettings().websub_signature == "sha256"
    with pytest.raises(SystemExit):
        parsed("--websub-signature", "md5")
    assert "--websub-signature: invalid choice: 'md5'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="'md5' is not one of sha1, sha256, sha384, sha512"):
        PushSettings(websub_signature="md5")


@pytest.mark.parametrize(("flags", "says"), [
    (("--lease-min", "1000", "--lease-default", "500"), "--lease-min (1000) <= --lease-default"),
    (("--push-retry-first", "60", "--push-retry-max", "10"), "--push-retry-first (60 s)"),
])
def test_flags_that_do_not_fit_together_are_named(flags, says):
    with pytest.raises(ValueError) as caught:
        push_settings(parsed(*flags))
    assert says in str(caught.value)


@pytest.mark.parametrize("flags", [("--push-retries", "0"), ("--push-rate", "-1"),
                                   ("--lease-max", "ten")])
def test_bad_values_are_usage_errors(flags, capsys):
    with pytest.raises(SystemExit) as caught:
        parsed(*flags)
    assert caught.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_serve_refuses_flags_that_do_not_fit_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "feedmesh", "serve", "--data", str(tmp_path),
                           "--port", "0", "--lease-min", "100", "--lease-max", "50"],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("feedmesh serve: --lease-min (100)")


async def test_a_served_hub_grants_leases_within_its_flags(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    hub = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "feedmesh", "serve", "--data", str(tmp_path), "--port", str(port),
        "--allow-network", "127.0.0.0/8", "--lease-min", "120", "--lease-default", "600",
        "--lease-max", "900", stderr=asyncio.subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as session, loopback_subscriber() as subscriber:
            async def up() -> bool:
                try:
                    async with session.get(base + "/api/openapi.json") as response:
                        return response.status == 200
                except aiohttp.ClientError:
                    return False
            await eventually(up, timeout=60.0)
            async with session.post(base + "/api/accounts", json={"name": "ann"}) as response:
                token = (await response.json())["token"]
            async with session.post(base + "/api/subscriptions", json={"query": "water"},
                                    headers={"Authorization": f"Bearer {token}"}) as response:
                topic = (await response.json())["subscription"]["feed_urls"]["atom"]
            for asked, granted in (("99999", "900"), ("5", "120"), ("", "600")):
                subscriber.want("subscribe", topic)
                form = {"hub.mode": "subscribe", "hub.topic": topic,
                        "hub.callback": subscriber.callback()}
                if asked:
                    form["hub.lease_seconds"] = asked
                before = len(subscriber.verifications)
                async with session.post(base + "/hub", data=form) as response:
                    assert response.status == 202, await response.text()
                await eventually(lambda n=before: len(subscriber.verifications) > n)
                assert subscriber.verifications[-1].params["hub.lease_seconds"] == granted
    finally:
        hub.terminate()
        await hub.wait()
