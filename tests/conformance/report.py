"""Print the conformance shares, and regenerate the case lists of docs/conformance.md.

    python -m tests.conformance.report            # print
    python -m tests.conformance.report --write    # also rewrite the generated part of the doc
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from tests.conformance.cases import feedparser_cases, shares
from tests.conformance.feedparser_adapter import Verdict
from tests.conformance.known import KNOWN, REASONS

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
BEGIN, END = "<!-- generated:begin -->", "<!-- generated:end -->"


def generated() -> str:
    lines = [("| corpus | agree | pass | verified deliberate | listed differences | failures "
              "| mappable | not mappable | strict |"), "|---|---|---|---|---|---|---|---|---|"]
    for share in shares():
        lines.append(f"| {share.corpus} | {share.share:.2%} | {share.passed} | {share.deliberate} "
                     f"| {share.known} | {share.failed} | {share.mappable} | {share.unmappable} "
                     f"| {share.strict_share:.2%} |")
    lines += ["", "### Listed differences, by reason", ""]
    by_reason: dict[str, list[str]] = defaultdict(list)
    for key, reason in KNOWN.items():
        by_reason[reason].append(key)
    for reason, keys in by_reason.items():
        lines.append(f"- `{reason}`: " + ", ".join(f"`{key}`" for key in keys))
    for verdict, title in ((Verdict.PLAIN_TITLE, "Titles compared as plain text"),
                           (Verdict.ESCAPED_TEXT, "Plain-text bodies compared HTML-escaped")):
        cases = [case.id for case in feedparser_cases() if case.verdict == verdict]
        lines += ["", f"### {title} ({len(cases)} feedparser cases, verified)", ""]
        lines.append(", ".join(f"`{case}`" for case in cases))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = generated()
    print(text)
    if "--write" in argv:
        doc = DOC.read_text(encoding="utf-8")
        head, _, rest = doc.partition(BEGIN)
        _, _, tail = rest.partition(END)
        DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")
        print(f"wrote {DOC}")
    missing = [name for name in REASONS if name not in KNOWN.values()]
    if missing:
        print(f"reasons no case uses: {missing}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
