from dataclasses import dataclass

from bank.account import Account
from bank.errors import BankError, UnknownAccount


@dataclass(frozen=True)
class Entry:
    kind: str
    account: str
    amount: int
    balance_after: int
    counterparty: str | None = None


class Ledger:
    def __init__(self) -> None:
        self._accounts: dict[str, Account] = {}
        self._entries: list[Entry] = []

    def open_account(self, account_id: str, initial: int = 0) -> Account:
        if account_id in self._accounts:
            raise BankError(f"account {account_id} already exists")
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
        account = self._get(account_id)
        account.balance += amount
        self._entries.append(Entry("deposit", account_id, amount, account.balance))

    def withdraw(self, account_id: str, amount: int) -> None:
        account = self._get(account_id)
        account.balance -= amount
        self._entries.append(Entry("withdraw", account_id, amount, account.balance))

    def transfer(self, source_id: str, target_id: str, amount: int) -> None:
        self.withdraw(source_id, amount)
        target = self._get(target_id)
        target.balance += amount
        self._entries.append(Entry("transfer_in", target_id, amount, target.balance, counterparty=source_id))

    def history(self, account_id: str) -> list[Entry]:
        self._get(account_id)
        return [entry for entry in self._entries if entry.account == account_id]
