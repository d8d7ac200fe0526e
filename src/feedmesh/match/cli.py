"""``feedmesh query``: check subscription queries from the command line.

``feedmesh query check "EXPR"`` prints the normalized form and exits 0, or prints the error with a
caret under the offending character and a hint on stderr and exits 2. ``--explain`` also lists the
AND-groups the index would file; ``--json`` prints one JSON object instead, for programs:
``{"valid": true, "query", "normalized", "conjunctions"}`` or ``{"valid": false, "query",
"error": {"message", "position", "hint"}}`` (same exit statuses).
"""

from __future__ import annotations

import argparse
import json
import sys

from feedmesh.match.errors import QueryError
from feedmesh.match.query import parse_query

__all__ = ["configure", "run"]

EXIT_INVALID = 2


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="query_action", metavar="ACTION")
    actions.required = True
    check = actions.add_parser(
        "check",
        help="print the normalized form of a query, or where and why it is invalid",
        description="Print the normalized form of a query (exit 0), or the error (exit 2).",
    )
    check.add_argument("expression", metavar="EXPR", help='the query, e.g. "law internet -patent"')
    check.add_argument(
        "--explain", action="store_true", help="also list the AND-groups the index would file"
    )
    check.add_argument("--json", action="store_true",
                       help="print one JSON object (normalized form and AND-groups, or the "
                            "error with its position and hint) for programs")


def run(args: argparse.Namespace) -> int:
    try:
        query = parse_query(args.expression)
    except QueryError as error:
        if args.json:
            print(json.dumps({"valid": False, "query": args.expression,
                              "error": {"message": error.message, "position": error.position,
                                        "hint": error.hint}}))
        else:
            print(f"feedmesh query: {error.describe(args.expression)}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print(json.dumps({"valid": True, "query": args.expression,
                          "normalized": query.normalized,
                          "conjunctions": [c.render() for c in query.conjunctions]}))
        return 0
    print(query.normalized)
    if args.explain:
        for number, conjunction in enumerate(query.conjunctions, 1):
            print(f"  {number}. {conjunction.render()}")
    return 0
