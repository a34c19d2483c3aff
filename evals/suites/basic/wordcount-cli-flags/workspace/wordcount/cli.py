"""The `wordcount` command line."""

import argparse
from collections import Counter

from wordcount.counting import count_words


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wordcount", description="Count words in text files.")
    parser.add_argument("files", nargs="+", metavar="FILE")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    total: Counter = Counter()
    for path in args.files:
        with open(path, encoding="utf-8") as handle:
            total.update(count_words(handle.read()))
    for word, count in sorted(total.items()):
        print(f"{word}\t{count}")
    return 0
