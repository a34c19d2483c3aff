from notify.events import Event


class EmailNotifier:
    def __init__(self, sender: str) -> None:
        self.sender = sender
        self.sent: list[str] = []

    def format_message(self, event: Event) -> str:
        return f"[{event.level.upper()}] {event.title}: {event.body}"

    def send(self, recipient: str, event: Event) -> str:
        text = self.format_message(event)
        message = f"From: {self.sender}\nTo: {recipient}\n\n{text}"
        self.sent.append(message)
        return message
