"""The one program: every flag of every command says what it does and, when it has one, its
default; ``--version`` answers."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from feedmesh import __version__
from feedmesh.cli import COMMANDS, HelpWithDefaults


def _parsers(parser: argparse.ArgumentParser, name: str):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_has_help_naming_its_default(command):
    parser = argparse.ArgumentParser(prog=f"feedmesh {command}", formatter_class=HelpWithDefaults)
    importlib.import_module(COMMANDS[command][0]).configure(parser)
    missing = []
    for name, each in _parsers(parser, command):
        each.formatter_class = HelpWithDefaults
        text = each.format_help()
        for action in each._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            if not action.help:
                missing.append(f"{name} {action.option_strings[0]}: no help")
                continue
            default = action.default
            if default not in (None, False, [], "", argparse.SUPPRESS) and \
                    str(default) not in text and "default" not in action.help.lower():
                missing.append(f"{name} {action.option_strings[0]}: default {default!r} unsaid")
    assert not missing, "\n".join(missing)


def test_version():
    done = subprocess.run([sys.executable, "-m", "feedmesh", "--version"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"feedmesh {__version__}"
