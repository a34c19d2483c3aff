import pytest

from calc import CalcError, evaluate


def test_precedence_and_parentheses():
    assert evaluate("1 + 2 * 3") == 7.0
    assert evaluate("(1 + 2) * 3") == 9.0
    assert evaluate("7 / 2 - 0.5") == 3.0
    assert evaluate("8 - 3 - 2") == 3.0


def test_division_by_zero():
    with pytest.raises(CalcError) as info:
        evaluate("1 / (2 - 2)")
    assert info.value.pos == 2


def test_errors_report_positions():
    with pytest.raises(CalcError) as info:
        evaluate("2 $ 3")
    assert info.value.pos == 2
    with pytest.raises(CalcError) as info:
        evaluate("(1 + 2")
    assert info.value.pos == 6


def test_unary_signs():
    assert evaluate("-3") == -3.0
    assert evaluate("2 * -3") == -6.0
    assert evaluate("-(1 + 2)") == -3.0
    assert evaluate("--2") == 2.0
    assert evaluate("+4 - -1") == 5.0


def test_power_precedence_and_associativity():
    assert evaluate("2^3^2") == 512.0
    assert evaluate("-2^2") == -4.0
    assert evaluate("2*3^2") == 18.0
    assert evaluate("2^-1") == 0.5
    assert evaluate("(2^3)^2") == 64.0


def test_variables():
    assert evaluate("rate * hours + 1", {"rate": 2.5, "hours": 4}) == 11.0
    assert evaluate("-x_1^2", {"x_1": 3}) == -9.0


def test_unknown_variable_reports_its_position():
    with pytest.raises(CalcError) as info:
        evaluate("a + foo", {"a": 1})
    assert info.value.pos == 4


def test_dangling_operators_are_errors():
    for source in ["2 ^", "3 * -", "-"]:
        with pytest.raises(CalcError):
            evaluate(source, {})
