"""Word counting."""

import re
from collections import Counter

WORD = re.compile(r"[A-Za-z']+")


def count_words(text: str) -> Counter:
    return Counter(WORD.findall(text))
