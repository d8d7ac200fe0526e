"""What a person reads on the page, in a real headless Chromium against a running hub and farm on
loopback (issue 33, item 15): the preview marks whole words as matching is by word, a feed URL on
a narrow screen wraps between its parts and never inside a word or its token, and the source list
says how the hub's crawl of each of the account's feeds goes (last fetch, next fetch, problems).

Driven like tests/hub/web/test_browser.py (Playwright over Chromium's DevTools pipe, Debian's
/usr/bin/chromium, waits on page conditions)."""

from __future__ import annotations

from playwright.async_api import async_playwright, expect

from tests.hub.web.test_browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, pytestmark  # noqa: F401

# Where each line of an element's text starts: every character's box, in order.
LINE_BREAKS = """(code) => {
  let text = "", top = null;
  const breaks = [];
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const y = range.getBoundingClientRect().top;
      if (top !== null && y > top + 2) breaks.push(text.length);
      top = y;
      text += node.data[i];
    }
  }
  return [text, breaks];
}"""

MARKED = """([text, terms]) => highlighted(text, terms)
  .map((part) => typeof part === "string" ? part : "[" + part.textContent + "]").join("")"""


async def test_marks_urls_and_crawl_state_read_right(hub_env, tmp_path):
    env = hub_env
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 400, "height": 800})
        page = context.pages[0] if context.pages else await context.new_page()
        page.set_default_timeout(WAIT_MS)
        expect.set_options(timeout=WAIT_MS)
        try:
            await page.goto(env.base + "/")
            await page.fill("#signup-name", "Ann")
            await page.click("#signup-button")
            await expect(page.locator("#dashboard")).to_be_visible()

            # The preview's marks: whole words, as the matcher matched them.
            cases = {
                ("Flawed law, lawful", ("law",)): "Flawed [law], lawful",
                ("A musical; music", ("music",)): "A musical; [music]",
                ("A musical; music", ("music*",)): "A [musical]; [music]",
                ("New-York and new yorkers", ('"new york"',)): "[New-York] and new yorkers",
                ("东京都", ("东京",)): "[东京]都",
            }
            for (text, terms), want in cases.items():
                assert await page.evaluate(MARKED, [text, list(terms)]) == want, (text, terms)

            # A source followed: the page says the hub crawls it, then when and how it went.
            await page.fill("#source-url", env.farm.feed_url(3))
            await page.click("#source-form button[type=submit]")
            summary = page.get_by_test_id("sources-summary")
            await expect(summary).to_contain_text("The hub crawls 1 feed for you")
            state = page.get_by_test_id("crawl-state")
            for _ in range(60):  # the list is drawn when loaded; reload it until fetched
                if "last fetch:" in await state.inner_text():
                    break
                await page.evaluate("loadSources()")
                await page.wait_for_timeout(500)
            await expect(state).to_contain_text("last fetch:")
            await expect(state).to_contain_text("ago")
            await expect(summary).to_contain_text("1 fetched, 0 with problems, 0 not fetched")
            await expect(page.get_by_test_id("next-fetch")).to_contain_text("next fetch:")

            # The feed URLs of a subscription, on a 400-px screen (a phone): each wraps only
            # after a "/" or before its extension, never inside the token.
            await page.fill("#query-input", "government OR music")
            await page.click("#sub-button")
            codes = page.locator("code.feed-link")
            await expect(codes).to_have_count(3)
            wrapped = 0
            for code in await codes.all():
                text, breaks = await code.evaluate(LINE_BREAKS)
                assert text.startswith("http://127.0.0.1") and "/f/" in text
                wrapped += bool(breaks)
                for at in breaks:
                    assert text[at - 1] == "/" or text[at] == ".", (text[:at], text[at:])
            assert wrapped, "the URLs fit on one line: the test proves nothing at this width"
        finally:
            await context.close()
