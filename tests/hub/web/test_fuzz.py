"""Fuzz the JSON API with schemathesis, driven by the hub's own OpenAPI description
(``/api/openapi.json``): no 5xx, every answer conforms to the description (status codes, content
types, response schemas, headers), data that violates the description is refused with a 4xx,
auth is never ignored, deleted resources stay deleted, and every error has the one JSON shape
(a custom check, :mod:`.schemathesis_hooks`).

``positive_data_acceptance`` is left out on purpose: a query is a small language and an OPML body
a document, and a JSON Schema cannot say which strings are valid ones, so "schema-valid but
refused with 400 invalid_query" is the API working, not a defect. Token rotation is left out too:
fuzzing it would revoke the token the run uses (tests/hub/web/test_security.py covers it).

The hub under fuzz crawls nothing: its fetcher resolves no names and its address guard refuses
even loopback, so the random feed URLs schemathesis adds send no packet anywhere. It pushes
nothing either: a public IP literal passes the guard, so webhooks are refused outright (a limit
of 0: the webhook answers are the 403 and 404 ones) and no WebSub topic can be guessed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from feedmesh.compose.embedded import embedded_hub
from feedmesh.compose.settings import HubSettings
from feedmesh.fetch import FetchSettings
from feedmesh.fetch.guard import StaticResolver
from feedmesh.hub.push.service import PushSettings
from feedmesh.hub.web import build_app
from feedmesh.hub.web.openapi import openapi
from tests.hub.web.conftest import ROOMY_LIMITS

ROOT = Path(__file__).resolve().parents[3]
SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or \
    shutil.which("schemathesis")
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_headers_conformance,response_schema_conformance,negative_data_rejection,"
          "missing_required_header,unsupported_method,use_after_free,"
          "ensure_resource_availability,ignored_auth,error_shape")
EXAMPLES_PER_OPERATION = 25
TIMEOUT_S = 150.0


@contextlib.asynccontextmanager
async def isolated_hub(data_dir: Path) -> AsyncIterator[str]:
    """A hub with its web server on loopback whose crawler cannot reach any address."""
    settings = HubSettings(data_dir=str(data_dir), crawl_interval_s=3600.0,
                           fetch=FetchSettings(total_timeout_s=2.0),
                           push=PushSettings(max_webhooks_per_subscription=0))
    hub = embedded_hub(settings, resolver=StaticResolver({}))
    await hub.start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    runner = web.AppRunner(build_app(hub.front, base_url=base, limits=ROOMY_LIMITS),
                           handle_signals=False, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        yield base
    finally:
        await runner.cleanup()
        await hub.stop()


@pytest.mark.slow
@pytest.mark.skipif(SCHEMATHESIS is None, reason="schemathesis is not installed (test extra)")
async def test_fuzz_the_api_from_its_openapi_description(tmp_path):
    async with isolated_hub(tmp_path / "hub") as base, aiohttp.ClientSession() as session:
        async with session.post(base + "/api/accounts", json={"name": "fuzz"}) as response:
            token = (await response.json())["token"]
        env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.hub.web.schemathesis_hooks",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        process = await asyncio.create_subprocess_exec(
            SCHEMATHESIS, "run", f"{base}/api/openapi.json",
            "--header", f"Authorization: Bearer {token}",
            "--exclude-path", "/api/accounts/me/token",
            "--checks", CHECKS, "--max-examples", str(EXAMPLES_PER_OPERATION),
            "--seed", "20261122", "--workers", "1", "--generation-database", "none",
            "--continue-on-failure", "--max-failures", "50", "--request-timeout", "30",
            "--report", "junit", "--report-dir", str(tmp_path / "report"), "--no-color",
            cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            output, _ = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise AssertionError(f"schemathesis did not finish in {TIMEOUT_S} s") from None
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-12_000:]
    # every operation the description lists but token rotation (excluded above)
    operations = sum(1 for methods in openapi("http://x")["paths"].values() for method in methods
                     if method in ("get", "post", "put", "patch", "delete"))
    assert f"Tested: {operations - 1}" in text, text[-3000:]
    assert " passed" in text and "failed" not in text.split("SUMMARY")[-1], text[-3000:]
    assert "Schema validation mismatch" not in text, text[-3000:]  # the schema is as strict
    # The one explicit example, the OPML document, is sent as it is and accepted.
    assert "1 passed" in text.split("Examples")[1].split("\n\n")[1], text[-3000:]
