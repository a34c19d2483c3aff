import abc

from notify.events import Event


class Notifier(abc.ABC):
    """Formatting and bookkeeping shared by every channel; channels only implement `deliver`."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def format_message(self, event: Event) -> str:
        head = f"[{event.level.upper()}] {event.title}"
        return f"{head}: {event.body}" if event.body else head

    @abc.abstractmethod
    def deliver(self, recipient: str, text: str) -> str:
        """The channel's message carrying `text` to `recipient`."""

    def send(self, recipient: str, event: Event) -> str:
        message = self.deliver(recipient, self.format_message(event))
        self.sent.append(message)
        return message
