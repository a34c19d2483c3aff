from notify.events import Event


class SmsNotifier:
    LIMIT = 160

    def __init__(self) -> None:
        self.sent: list[str] = []

    def format_message(self, event: Event) -> str:
        return f"[{event.level.upper()}] {event.title}: {event.body}"

    def send(self, recipient: str, event: Event) -> str:
        text = self.format_message(event)
        if len(text) > self.LIMIT:
            text = text[: self.LIMIT - 3] + "..."
        message = f"{recipient}: {text}"
        self.sent.append(message)
        return message
