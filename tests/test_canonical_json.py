"""The canonical JSON spelling is one rule, spelled once in each leaf that hashes JSON (the leaves
may not import each other): the three spellings must agree."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hitrate.projection.canonical import canonical_json as projection_json
from hitrate.store.prices import canonical_json as store_json
from hitrate.tools.base import canonical_json as tools_json
from pydantic import BaseModel

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


class _Wrapped(BaseModel):
    value: object


@given(json_values)
def test_the_three_spellings_agree(value: object) -> None:
    text = projection_json(value)
    assert tools_json(value) == text
    assert store_json(_Wrapped(value=value)) == projection_json({"value": value})
