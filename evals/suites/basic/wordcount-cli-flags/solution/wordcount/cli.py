"""The `wordcount` command line."""

import argparse
import sys
from collections import Counter

from wordcount.counting import count_words


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wordcount", description="Count words in text files.")
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--top", type=int, metavar="N", help="only the N most frequent words")
    parser.add_argument("-i", "--ignore-case", action="store_true", help="fold words to lowercase")
    parser.add_argument("--min-length", type=int, default=1, metavar="N", help="ignore shorter words")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    total: Counter = Counter()
    for path in args.files:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            print(f"wordcount: cannot read {path}", file=sys.stderr)
            return 2
        total.update(count_words(text, ignore_case=args.ignore_case, min_length=args.min_length))
    if args.top is not None:
        rows = sorted(total.items(), key=lambda item: (-item[1], item[0]))[: args.top]
    else:
        rows = sorted(total.items())
    for word, count in rows:
        print(f"{word}\t{count}")
    return 0
