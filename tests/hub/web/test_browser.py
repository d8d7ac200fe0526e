"""A person's whole path through the HTML interface, in a real headless Chromium (Debian's), against
a running hub crawling a real farm on loopback:

sign up -> a bad query shows its positioned error inline -> a good query previews matches ->
subscribe -> the feed URLs are shown and one is copied -> import an OPML file of farm feeds through
the file input -> "Show recent matches" lists entries -> the feed URL, opened in the browser, is a
feed holding those entries -> edit the subscription (a bad query shows why) -> replace its URL
(the old one answers 404) -> remove a source.

Driven with Playwright's async API over Chromium's DevTools pipe: it needs no chromedriver, runs
in the test's own event loop beside the hub (no threads), and waits on page conditions instead of
sleeping. It never downloads a browser: it launches /usr/bin/chromium (``scripts/apt-test-packages``
installs it). Screenshots of the finished page are written to ``artifacts/web-ui.png`` (first
screen, the one in docs/img/) and ``artifacts/web-ui-full.png``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import feedparser
import pytest
from playwright.async_api import Page, async_playwright, expect

from feedmesh.feeds.opml import OpmlOutline, render_opml
from tests.eventually import eventually
from tests.hub.web.conftest import FARM_QUERY, settle, unchanged

CHROMIUM = os.environ.get("FEEDMESH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[3] / "artifacts"
WAIT_MS = 60_000  # generous: a loaded 2-core machine

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"chromium not installed at {CHROMIUM} (scripts/apt-test-packages "
                              "installs it; FEEDMESH_CHROMIUM names another binary)"),
]


async def _matches_listed(page: Page, sub_id: str) -> list[tuple[str, str]]:
    """Click "Show recent matches" and return the (title, link) pairs it lists, read from the
    page once it shows what the click's answer held (the list is redrawn after the answer)."""
    answered = f"/api/subscriptions/{sub_id}/entries"
    async with page.expect_response(lambda r: r.url.endswith(answered)) as info:
        await page.get_by_test_id(f"show-matches-{sub_id}").click()
    entries = (await (await info.value).json())["entries"]
    selector = f'[data-testid="matches-{sub_id}"] li a'
    await page.wait_for_function(
        """([selector, want]) => JSON.stringify([...document.querySelectorAll(selector)]
               .map((a) => a.getAttribute("href"))) === JSON.stringify(want)""",
        arg=[selector, [entry["link"] for entry in entries]])
    links = page.locator(selector)
    return [(await link.inner_text(), await link.get_attribute("href"))
            for link in await links.all()]


async def test_sign_up_subscribe_import_and_read_the_feed(hub_env, tmp_path):
    env = hub_env
    # Another person already follows half of the farm, so the hub holds articles to preview.
    operator = await env.anonymous.sign_up("operator")
    half = [env.farm.feed_url(n) for n in range(20)]
    status, _ = await operator.call("POST", "/api/opml", data=render_opml(
        "half", [OpmlOutline(url=u) for u in half]), headers={"Content-Type": "text/xml"})
    assert status == 200
    await eventually(lambda: env.hub.store.entry_count() >= 100, timeout=60.0)
    # The OPML file the person will upload: the other half.
    opml_file = tmp_path / "my-feeds.opml"
    opml_file.write_bytes(render_opml("mine", [OpmlOutline(url=env.farm.feed_url(n),
                                                           title=f"farm feed {n}")
                                               for n in range(20, 40)]))
    ARTIFACTS.mkdir(exist_ok=True)

    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1000, "height": 1400},
            permissions=["clipboard-read", "clipboard-write"])
        page = context.pages[0] if context.pages else await context.new_page()
        page.set_default_timeout(WAIT_MS)
        expect.set_options(timeout=WAIT_MS)
        try:
            await _walk_the_path(env, page, opml_file)
        finally:
            await page.screenshot(path=str(ARTIFACTS / "web-ui.png"))  # the first screen
            await page.screenshot(path=str(ARTIFACTS / "web-ui-full.png"), full_page=True)
            await context.close()


async def _walk_the_path(env, page: Page, opml_file: Path) -> None:
    # 1. Sign up.
    await page.goto(env.base + "/")
    await expect(page.locator("#signup")).to_be_visible()
    await page.fill("#signup-name", "Ann Example")
    await page.click("#signup-button")
    await expect(page.locator("#dashboard")).to_be_visible()
    await expect(page.locator("#welcome")).to_have_text("Signed in as Ann Example.")
    token = await page.locator("#token-value").inner_text()
    assert token.startswith("fm_")

    # 2. A bad query: the error is shown inline, a caret under the position, and a hint.
    await page.fill("#query-input", "water AND (music")
    error = page.locator("#query-error")
    await expect(error).to_contain_text("unbalanced parenthesis at 10")
    lines = (await error.inner_text()).split("\n")
    assert lines[1] == "  water AND (music"
    assert lines[2] == "  " + " " * 10 + "^"  # under the '(' that is never closed
    assert lines[3].startswith("hint: ")
    await expect(page.locator("#preview-list li")).to_have_count(0)

    # 3. A good query: the preview lists matching articles, and the error is gone.
    await page.fill("#query-input", FARM_QUERY)
    await expect(page.locator("#preview-summary")).to_contain_text("most recent articles match")
    await expect(error).to_have_text("")
    summary = await page.locator("#preview-summary").inner_text()
    matched = int(summary.split(" of the ")[0])
    assert matched > 0, summary
    preview = page.locator("#preview-list li a")
    await expect(preview).to_have_count(min(matched, 10))
    first_preview = await preview.first.get_attribute("href")
    assert first_preview.startswith(env.farm.base_url)
    # Why each entry matched: its terms are marked in its title or excerpt.
    marks = [m.lower() for m in await page.locator("#preview-list mark").all_inner_texts()]
    assert marks and set(marks) <= {"government", "music", "water"}, marks

    # 4. Subscribe; the feed URLs are shown; copy one.
    await page.fill("#sub-name", "my news")
    await page.click("#sub-button")
    item = page.get_by_test_id("subscription")
    await expect(item).to_have_count(1)
    await expect(item.locator("strong")).to_have_text("my news")
    await expect(page.locator("#query-input")).to_have_value("")
    sub_id = await item.get_attribute("data-id")
    urls = [await code.inner_text() for code in await item.locator("code.feed-link").all()]
    assert [u.rsplit(".", 1)[1] for u in urls] == ["rss", "atom", "json"]
    assert all(u.startswith(env.base + "/f/") for u in urls)
    copy = item.locator(".feed-url").first.locator("button.copy")
    await copy.click()
    await expect(copy).to_have_text("Copied")
    copied = await page.evaluate("navigator.clipboard.readText()")
    assert copied == urls[0]

    # 5. Import an OPML file through the file input.
    await page.set_input_files("#opml-file", str(opml_file))
    await page.locator("#opml-form button[type=submit]").click()
    await expect(page.locator("#source-status")).to_have_text("Imported 20 feeds")
    await expect(page.get_by_test_id("source")).to_have_count(20)
    await expect(page.locator("#source-error")).to_have_text("")

    # 6. Wait until "Show recent matches" lists entries (the imported feeds' first crawl brings
    #    a backlog of new entries; later ones arrive as the farm posts).
    await settle(env)
    listed: list[tuple[str, str]] = []

    async def listed_some() -> bool:
        listed[:] = await _matches_listed(page, sub_id)
        return len(listed) > 0

    await eventually(listed_some, timeout=90.0)
    crawled = {state.url for state in env.hub.crawler.crawler.states.values()
               if state.last_fetched_at}
    assert {env.farm.feed_url(n) for n in range(20, 40)} <= crawled  # the import took effect

    # 7. Open the copied feed URL in the browser: a feed holding exactly the listed entries
    #    (read both while the feed did not change: the farm keeps posting).
    async def read_both() -> tuple[list, dict]:
        shown = await _matches_listed(page, sub_id)
        fetched = await page.evaluate("""async (url) => {
            const r = await fetch(url, {cache: "no-store"});  // max-age=60: a retry must not
                                                              // read the browser's copy
            return {status: r.status, type: r.headers.get("Content-Type"), text: await r.text()};
        }""", copied)
        return shown, fetched

    shown, fetched = await unchanged(env, int(sub_id), read_both)
    assert fetched["status"] == 200
    assert fetched["type"].startswith("application/rss+xml")
    feed = feedparser.parse(fetched["text"].encode())
    assert not feed.bozo and feed.version == "rss20"
    assert feed.feed.title == "feedmesh: my news"
    assert [(e.title, e.link) for e in feed.entries] == shown
    assert 0 < len(shown) <= 10
    farm_feeds = {env.farm.feed_url(n) for n in range(40)}
    assert {e.source.href for e in feed.entries} <= farm_feeds

    # 8. Edit the subscription: name and keep; a bad query shows why, inline.
    await page.get_by_test_id(f"edit-{sub_id}").click()
    form = page.get_by_test_id(f"edit-form-{sub_id}")
    await form.locator("input[name=query]").fill("water AND (music")
    await form.locator("button[type=submit]").click()
    await expect(form.locator("pre.error")).to_contain_text("unbalanced parenthesis")
    await form.locator("input[name=query]").fill(FARM_QUERY)
    await form.locator("input[name=name]").fill("my news, shorter")
    await form.locator("input[name=keep]").fill("5")
    await form.locator("button[type=submit]").click()
    await expect(item.locator("strong")).to_have_text("my news, shorter")
    await expect(item.locator(".meta").first).to_contain_text("keeps 5 entries")
    # What the feed holds and how far back its archive reaches (issue 33, item 4).
    await expect(page.get_by_test_id(f"holds-{sub_id}")).to_contain_text(
        re.compile(r"^feed holds \d+ of 5 · readers asked to poll every \d+ min · older "
                   r"matches in its archive back to \S"))

    # 9. A new feed URL: the old one stops working, the new one is shown.
    page.once("dialog", lambda dialog: dialog.accept())
    await page.get_by_test_id(f"new-url-{sub_id}").click()
    await expect(item.locator("code.feed-link").first).not_to_have_text(urls[0])
    gone = await page.evaluate("async (url) => (await fetch(url)).status", urls[0])
    assert gone == 404

    # 10. Remove a source.
    sources = page.get_by_test_id("source")
    removed = await sources.first.get_attribute("data-id")
    page.once("dialog", lambda dialog: dialog.accept())
    await page.get_by_test_id(f"remove-source-{removed}").click()
    await expect(sources).to_have_count(19)
    assert all(link.startswith(env.farm.base_url) for _, link in shown)
