import pytest

from semver import compare, sort_versions


def test_equal_versions():
    assert compare("1.2.3", "1.2.3") == 0


def test_single_digit_ordering():
    assert compare("1.2.3", "2.0.0") == -1
    assert compare("1.3.0", "1.2.9") == 1
    assert sort_versions(["2.0.0", "1.0.0", "1.5.0"]) == ["1.0.0", "1.5.0", "2.0.0"]


def test_numeric_parts_compare_as_numbers():
    assert compare("1.10.0", "1.9.0") == 1
    assert compare("10.0.0", "9.99.99") == 1


def test_pre_release_sorts_before_release():
    assert compare("1.0.0-rc.1", "1.0.0") == -1
    assert compare("1.0.0", "1.0.0-rc.1") == 1


def test_pre_release_precedence_chain():
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
             "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]
    assert sort_versions(list(reversed(chain))) == chain
    for lower, higher in zip(chain, chain[1:]):
        assert compare(lower, higher) == -1


def test_build_metadata_is_ignored():
    assert compare("1.0.0+a", "1.0.0+b") == 0
    assert compare("1.0.0-rc.1+build.5", "1.0.0") == -1


@pytest.mark.parametrize("bad", ["1.2", "1.x.3", "", "1.2.3-"])
def test_malformed_versions_raise(bad):
    with pytest.raises(ValueError):
        compare(bad, "1.0.0")
