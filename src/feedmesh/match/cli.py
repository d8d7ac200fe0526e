"""``feedmesh query``: check subscription queries from the command line.

``feedmesh query check "EXPR"`` prints the normalized form and exits 0, or prints the error with a
caret under the offending character and a hint on stderr and exits 2. ``--explain`` also lists the
AND-groups the index would file.
"""

from __future__ import annotations

import argparse
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


def run(args: argparse.Namespace) -> int:
    try:
        query = parse_query(args.expression)
    except QueryError as error:
        print(f"feedmesh query: {error.describe(args.expression)}", file=sys.stderr)
        return EXIT_INVALID
    print(query.normalized)
    if args.explain:
        for number, conjunction in enumerate(query.conjunctions, 1):
            print(f"  {number}. {conjunction.render()}")
    return 0
