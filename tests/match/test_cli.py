"""``feedmesh query check``: the normalized form (exit 0) or a positioned error (exit 2)."""

from __future__ import annotations

import pytest

from feedmesh.cli import main


def test_check_prints_the_normalized_form(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "check", "Law  internet -patent"]) == 0
    out, err = capsys.readouterr()
    assert out == "internet AND law AND NOT patent\n" and err == ""


def test_check_explains_the_conjunctions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "check", "--explain", "e-mail (spam OR scam)"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "e-mail AND (scam OR spam)"
    assert lines[1:] == [
        '  1. "e mail" AND scam',
        '  2. "e mail" AND spam',
        "  3. email AND scam",
        "  4. email AND spam",
    ]


def test_check_reports_the_error_position_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "check", "internet laws (privacy OR security"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == "feedmesh query: unbalanced parenthesis at 14"
    assert lines[2].index("^") - 2 == 14  # the caret sits under character 14
    assert lines[3].startswith("hint: ")


def test_check_needs_an_expression(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["query", "check"])
    assert exited.value.code == 2


def test_check_json_for_programs(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["query", "check", "--json", "e-mail (spam OR scam)"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["valid"] and answer["normalized"] == "e-mail AND (scam OR spam)"
    assert answer["conjunctions"][0] == '"e mail" AND scam' and len(answer["conjunctions"]) == 4
    assert main(["query", "check", "--json", "internet laws (privacy OR security"]) == 2
    out, err = capsys.readouterr()
    answer = json.loads(out)
    assert err == "" and not answer["valid"]
    assert answer["error"]["position"] == 14 and answer["error"]["message"] == \
        "unbalanced parenthesis" and answer["error"]["hint"]
