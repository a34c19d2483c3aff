class CalcError(Exception):
    """A problem with an expression; `pos` is the 0-based index where it was found."""

    def __init__(self, message: str, pos: int) -> None:
        self.pos = pos
        super().__init__(f"{message} at position {pos}")
