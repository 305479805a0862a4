"""The command line: `python -m mechanisms.ldp.client --protocol oue --epsilon 1 --domain 16 --value 3`
prints one user's report row as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from . import PROTOCOLS


def main(argv: list[str] | None = None) -> int:
    """Print one user's report row as JSON: `--protocol NAME --epsilon E --value V` and the protocol's parameters."""
    parser = argparse.ArgumentParser(prog="python -m mechanisms.ldp.client",
                                     description="Randomize one user's value under ε-local differential privacy.")
    parser.add_argument("--protocol", required=True, choices=sorted(PROTOCOLS))
    parser.add_argument("--epsilon", required=True, type=float)
    parser.add_argument("--value", required=True, type=lambda s: int(s, 0),
                        help="the user's value in [0, D); for marginal protocols the record as a d-bit "
                             "integer (0b… allowed)")
    parser.add_argument("--domain", type=int, help="D, the public domain size (frequency and range protocols)")
    parser.add_argument("--attributes", type=int, help="d, the number of binary attributes (marginal protocols)")
    parser.add_argument("--order", type=int, help="k, the marginal order (marginal protocols)")
    parser.add_argument("--branching", type=int, help="B, the tree's fan-out (hh; default 4)")
    parser.add_argument("--oracle", choices=("oue", "hrr"), help="hh's per-level frequency oracle (default oue)")
    parser.add_argument("--urls", type=lambda s: tuple(int(v) for v in s.split(",")),
                        help="grr2: URLs per head-list query, ⋆ included, comma-separated (e.g. 3,1,2)")
    parser.add_argument("--query-share", dest="query_share", type=float, help="grr2: f_C, ε's share for the query")
    parser.add_argument("--delta", type=float, help="grr2: δ of the report (default 0)")
    args = parser.parse_args(argv)
    cls = PROTOCOLS[args.protocol]
    fields = {f.name for f in dataclasses.fields(cls)}
    names = ("domain", "attributes", "order", "branching", "oracle", "urls", "query_share", "delta")
    given = {name: getattr(args, name) for name in names
             if getattr(args, name) is not None}
    extra = set(given) - fields
    if extra:
        parser.error(f"{args.protocol} takes no --{' --'.join(sorted(extra))}")
    missing = sorted(f.name for f in dataclasses.fields(cls)
                     if f.default is dataclasses.MISSING and f.name not in given and f.name != "epsilon")
    if missing:
        parser.error(f"{args.protocol} needs --{' --'.join(missing)}")
    try:
        row = cls(epsilon=args.epsilon, **given).report(args.value)
    except ValueError as exc:
        parser.error(str(exc))
    json.dump(row, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
