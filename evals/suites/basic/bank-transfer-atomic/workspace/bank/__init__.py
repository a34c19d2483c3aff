"""A tiny in-memory bank ledger (amounts in integer cents)."""

from bank.account import Account
from bank.errors import BankError, InsufficientFunds, UnknownAccount
from bank.ledger import Entry, Ledger

__all__ = ["Account", "BankError", "Entry", "InsufficientFunds", "Ledger", "UnknownAccount"]
