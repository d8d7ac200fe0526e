"""The one ``feedmesh`` program. Each role is a subcommand: a stage's own command lives in that
stage's package, a program that wires stages together in :mod:`feedmesh.commands`.

A command is registered here by name only; its module is imported when the command runs, so
``feedmesh --help`` stays fast and one package's dependencies never slow another's command.
Each command module exposes ``configure(parser)`` and ``run(args) -> int`` (the exit status).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from feedmesh import __version__, runloop
from feedmesh.errors import FeedmeshError

__all__ = ["COMMANDS", "HelpWithDefaults", "build_parser", "main"]

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("feedmesh.commands.demo",
             "start a synthetic farm and run feedmesh on it (the main job)"),
    "farm": ("feedmesh.farm.cli", "serve synthetic feeds on loopback (the testbed)"),
    "parse": ("feedmesh.feeds.cli", "parse a feed file or URL and print it as normalized JSON"),
    "crawl": ("feedmesh.commands.crawl", "crawl every feed of an OPML list into the store"),
    "query": ("feedmesh.match.cli", "check subscription queries"),
    "sim": ("feedmesh.schedule.cli", "replay a posting trace against fetch policies"),
    "map": ("feedmesh.commands.map",
            "assign feeds to crawlers by latency and work (Cobra 3.7); --apply moves them"),
    "serve": ("feedmesh.commands.serve",
              "run the hub: crawler, filters, reflectors and web, on SQLite"),
    "stats": ("feedmesh.commands.stats", "print a running hub's figures"),
    "url-key": ("feedmesh.commands.url_key",
                "show, rotate or retire the key that signs private feed URLs"),
    "deliveries": ("feedmesh.commands.deliveries",
                   "print every WebSub subscription's and webhook's delivery log"),
    "filter": ("feedmesh.commands.filter", "run one filter shard in its own process, on NATS"),
    "reflector": ("feedmesh.commands.reflector", "run one reflector in its own process, on NATS"),
    "web": ("feedmesh.commands.web", "run the web layer (sign-up, API, private feeds) on its own"),
    "crawler": ("feedmesh.commands.crawler", "run the crawling hub without a web server"),
    "up": ("feedmesh.commands.up", "start a hub as several processes joined by NATS JetStream"),
    "down": ("feedmesh.commands.down", "stop what `feedmesh up` started"),
    "provision": ("feedmesh.provision.cli", "plan a topology of crawlers, filters and reflectors"),
    "keys": ("feedmesh.mesh.keys.cli",
             "make, show, rotate or revoke a mesh publisher's signing key"),
    "republish": ("feedmesh.commands.republish",
                  "poll legacy feeds and multicast what is new on the mesh, signed (SCRIBE-RSS)"),
    "peer": ("feedmesh.commands.peer",
             "run a FeedEx peer: follow feeds, swap entries with neighbours, serve your reader"),
    "tracker": ("feedmesh.commands.tracker", "run a FeedEx tracker, where peers find neighbours"),
}


class HelpWithDefaults(argparse.HelpFormatter):
    """Every flag's help ends with its default, unless it says it already or has none worth
    saying (off, nothing)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text.lower() or default in (None, False, [], "", argparse.SUPPRESS)
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedmesh",
        description="Follow the web's feeds at scale, politely.",
        formatter_class=HelpWithDefaults,
    )
    parser.add_argument("--version", action="version", version=f"feedmesh {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text,
                                        formatter_class=HelpWithDefaults)
        command_parser.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # Find the command first, then let its module declare its own arguments.
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in COMMANDS:
        module = importlib.import_module(COMMANDS[command][0])
        sub_action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        module.configure(sub_action.choices[command])
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser: its usage, not the program's
        sub_action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub_action.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `feedmesh stats --json | head`: the reader left, nothing is wrong
        # Python flushes stdout again at exit and would say so: point it at nothing instead.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (runloop.LoopChoiceError, FeedmeshError) as exc:  # commands that do not say it
        print(f"feedmesh {command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
