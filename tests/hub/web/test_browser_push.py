"""The push panel of the web page, in a real headless Chromium (as tests/hub/web/test_browser.py):
add a webhook to a subscription, see its signing secret once, press "Send test", and read the
delivery in its log (time, test, attempt, HTTP status) as the receiver on loopback got it; choose
a WebSub subscriber's X-Hub-Signature method."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.async_api import async_playwright, expect

from tests.eventually import eventually
from tests.hub.web.conftest import subscribe
from tests.hub.web.test_browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS
from tests.websub.subscriber import loopback_subscriber

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"no Chromium at {CHROMIUM} (scripts/apt-test-packages installs it)"),
]


async def test_add_a_webhook_send_a_test_and_read_its_delivery_log(hub_env, ann, tmp_path):
    sub = await subscribe(ann, "water")
    async with loopback_subscriber() as receiver, async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1000, "height": 1200})
        page = context.pages[0] if context.pages else await context.new_page()
        page.set_default_timeout(WAIT_MS)
        expect.set_options(timeout=WAIT_MS)
        try:
            await page.goto(hub_env.base + "/")
            await page.evaluate("token => localStorage.setItem('feedmesh-token', token)",
                                ann.token)
            await page.reload()
            await page.get_by_test_id(f"push-{sub['id']}").click()
            panel = page.get_by_test_id(f"push-panel-{sub['id']}")
            await expect(panel).to_contain_text("WebSub subscribers")
            await page.get_by_test_id(f"webhook-url-{sub['id']}").fill(
                "http://10.0.0.7/hook")
            await panel.get_by_role("button", name="Add webhook").click()
            await expect(panel.locator(".error")).to_contain_text("private address")
            await page.get_by_test_id(f"webhook-url-{sub['id']}").fill(
                receiver.callback("/hook"))
            await panel.get_by_role("button", name="Add webhook").click()
            secret = await panel.get_by_test_id("webhook-secret").locator("code").inner_text()
            assert len(secret) >= 32
            (hook,) = hub_env.hub.front.push_targets(sub["id"])
            await page.get_by_test_id(f"webhook-test-{hook.id}").click()
            log = page.get_by_test_id(f"deliveries-{hook.id}")
            await expect(log.get_by_test_id("delivery").first).to_contain_text("HTTP 200")
            await expect(log.get_by_test_id("delivery").first).to_contain_text("test")
            (delivery,) = receiver.to("/hook")
            assert json.loads(delivery.body)["event"] == "test"
        finally:
            await context.close()


async def test_choose_a_websub_subscribers_signature_method_on_the_page(hub_env, ann, tmp_path):
    from tests.hub.web.test_websub_hub import subscribed

    sub = await subscribe(ann, "water")
    async with loopback_subscriber() as subscriber, async_playwright() as playwright:
        await subscribed(hub_env, subscriber, sub["feed_urls"]["atom"], hub_secret="s3cret")
        (target,) = hub_env.hub.front.push_targets(sub["id"])
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1000, "height": 1200})
        page = context.pages[0] if context.pages else await context.new_page()
        page.set_default_timeout(WAIT_MS)
        expect.set_options(timeout=WAIT_MS)
        try:
            await page.goto(hub_env.base + "/")
            await page.evaluate("token => localStorage.setItem('feedmesh-token', token)",
                                ann.token)
            await page.reload()
            await page.get_by_test_id(f"push-{sub['id']}").click()
            method = page.get_by_test_id(f"websub-signature-{target.id}")
            await expect(method).to_have_value("sha256")
            await method.select_option("sha1")
            # The choice is the server's once the PATCH is answered (the panel is redrawn).
            await eventually(lambda: hub_env.hub.front.push_targets(sub["id"])[0].signature
                             == "sha1")
            saved = await hub_env.hub.io.call(hub_env.hub.state.push_targets, sub["id"])
            assert [t.signature for t in saved] == ["sha1"]
            await page.reload()
            await page.get_by_test_id(f"push-{sub['id']}").click()
            await expect(page.get_by_test_id(f"websub-signature-{target.id}")).to_have_value(
                "sha1")
        finally:
            await context.close()
