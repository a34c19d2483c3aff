"""URL slugs."""

import re


def slugify(text: str, max_length: int | None = None) -> str:
    slug = text.lower()
    slug = re.sub(r"[^a-z0-9]", "-", slug)
    if max_length:
        slug = slug[:max_length]
    return slug
