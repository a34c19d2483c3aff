from notify.base import Notifier


class EmailNotifier(Notifier):
    def __init__(self, sender: str) -> None:
        super().__init__()
        self.sender = sender

    def deliver(self, recipient: str, text: str) -> str:
        return f"From: {self.sender}\nTo: {recipient}\n\n{text}"
