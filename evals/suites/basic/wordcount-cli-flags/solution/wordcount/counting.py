"""Word counting."""

import re
from collections import Counter

WORD = re.compile(r"[A-Za-z']+")


def count_words(text: str, ignore_case: bool = False, min_length: int = 1) -> Counter:
    words = WORD.findall(text)
    if ignore_case:
        words = [w.lower() for w in words]
    return Counter(w for w in words if len(w) >= min_length)
