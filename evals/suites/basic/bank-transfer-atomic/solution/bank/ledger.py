from dataclasses import dataclass

from bank.account import Account
from bank.errors import BankError, InsufficientFunds, UnknownAccount


@dataclass(frozen=True)
class Entry:
    kind: str
    account: str
    amount: int
    balance_after: int
    counterparty: str | None = None


def _check_amount(amount: int) -> None:
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise ValueError(f"amount must be a positive int of cents, got {amount!r}")


class Ledger:
    """Every operation validates everything first and only then changes state, so a failure
    leaves balances and history exactly as they were."""

    def __init__(self) -> None:
        self._accounts: dict[str, Account] = {}
        self._entries: list[Entry] = []

    def open_account(self, account_id: str, initial: int = 0) -> Account:
        if account_id in self._accounts:
            raise BankError(f"account {account_id} already exists")
        if initial:
            _check_amount(initial)
        account = self._accounts[account_id] = Account(account_id)
        if initial:
            self.deposit(account_id, initial)
        return account

    def _get(self, account_id: str) -> Account:
        try:
            return self._accounts[account_id]
        except KeyError:
            raise UnknownAccount(account_id) from None

    def balance(self, account_id: str) -> int:
        return self._get(account_id).balance

    def deposit(self, account_id: str, amount: int) -> None:
        _check_amount(amount)
        account = self._get(account_id)
        account.balance += amount
        self._entries.append(Entry("deposit", account_id, amount, account.balance))

    def withdraw(self, account_id: str, amount: int) -> None:
        _check_amount(amount)
        account = self._get(account_id)
        if account.balance < amount:
            raise InsufficientFunds(f"{account_id} has {account.balance}, needs {amount}")
        account.balance -= amount
        self._entries.append(Entry("withdraw", account_id, amount, account.balance))

    def transfer(self, source_id: str, target_id: str, amount: int) -> None:
        _check_amount(amount)
        source, target = self._get(source_id), self._get(target_id)
        if source is target:
            raise ValueError("cannot transfer to the same account")
        if source.balance < amount:
            raise InsufficientFunds(f"{source_id} has {source.balance}, needs {amount}")
        source.balance -= amount
        target.balance += amount
        self._entries.append(Entry("transfer_out", source_id, amount, source.balance, counterparty=target_id))
        self._entries.append(Entry("transfer_in", target_id, amount, target.balance, counterparty=source_id))

    def history(self, account_id: str) -> list[Entry]:
        self._get(account_id)
        return [entry for entry in self._entries if entry.account == account_id]
