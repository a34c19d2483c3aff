from notify.base import Notifier


class SmsNotifier(Notifier):
    LIMIT = 160

    def deliver(self, recipient: str, text: str) -> str:
        if len(text) > self.LIMIT:
            text = text[: self.LIMIT - 3] + "..."
        return f"{recipient}: {text}"
