import pytest

from bank import BankError, Entry, InsufficientFunds, Ledger, UnknownAccount


def ledger_with(**balances):
    ledger = Ledger()
    for name, cents in balances.items():
        ledger.open_account(name, cents)
    return ledger


def test_deposit_and_withdraw():
    ledger = ledger_with(alice=1000)
    ledger.deposit("alice", 250)
    ledger.withdraw("alice", 200)
    assert ledger.balance("alice") == 1050
    assert ledger.history("alice") == [
        Entry("deposit", "alice", 1000, 1000),
        Entry("deposit", "alice", 250, 1250),
        Entry("withdraw", "alice", 200, 1050),
    ]


def test_unknown_and_duplicate_accounts():
    ledger = ledger_with(alice=0)
    with pytest.raises(UnknownAccount):
        ledger.balance("bob")
    with pytest.raises(BankError):
        ledger.open_account("alice")


def test_transfer_moves_money():
    ledger = ledger_with(alice=1000, bob=0)
    ledger.transfer("alice", "bob", 300)
    assert (ledger.balance("alice"), ledger.balance("bob")) == (700, 300)


def test_overdraft_is_refused_and_changes_nothing():
    ledger = ledger_with(alice=100, bob=0)
    with pytest.raises(InsufficientFunds):
        ledger.withdraw("alice", 101)
    with pytest.raises(InsufficientFunds):
        ledger.transfer("alice", "bob", 500)
    assert (ledger.balance("alice"), ledger.balance("bob")) == (100, 0)
    assert len(ledger.history("alice")) == 1 and ledger.history("bob") == []


def test_transfer_to_unknown_account_changes_nothing():
    ledger = ledger_with(alice=100)
    with pytest.raises(UnknownAccount):
        ledger.transfer("alice", "nobody", 50)
    with pytest.raises(UnknownAccount):
        ledger.transfer("nobody", "alice", 50)
    assert ledger.balance("alice") == 100
    assert len(ledger.history("alice")) == 1


def test_invalid_amounts_are_refused():
    ledger = ledger_with(alice=100, bob=0)
    for amount in [0, -5, 1.5]:
        with pytest.raises(ValueError):
            ledger.deposit("alice", amount)
        with pytest.raises(ValueError):
            ledger.withdraw("alice", amount)
        with pytest.raises(ValueError):
            ledger.transfer("alice", "bob", amount)
    with pytest.raises(ValueError):
        ledger.transfer("alice", "alice", 10)
    with pytest.raises(ValueError):
        ledger.open_account("carol", -1)
    assert (ledger.balance("alice"), ledger.balance("bob")) == (100, 0)
    assert len(ledger.history("alice")) == 1 and ledger.history("bob") == []


def test_transfer_history_entries():
    ledger = ledger_with(alice=1000, bob=0)
    ledger.transfer("alice", "bob", 300)
    assert ledger.history("alice")[-1] == Entry("transfer_out", "alice", 300, 700, counterparty="bob")
    assert ledger.history("bob") == [Entry("transfer_in", "bob", 300, 300, counterparty="alice")]
