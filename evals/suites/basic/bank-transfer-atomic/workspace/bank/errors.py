class BankError(Exception):
    pass


class UnknownAccount(BankError):
    pass


class InsufficientFunds(BankError):
    pass
