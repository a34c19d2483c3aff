"""Send event notifications over several channels."""

from notify.email_notifier import EmailNotifier
from notify.events import Event
from notify.sms_notifier import SmsNotifier

__all__ = ["EmailNotifier", "Event", "SmsNotifier", "notify_all"]


def notify_all(notifiers: list, recipient: str, event: Event) -> list[str]:
    """Send `event` to `recipient` through every notifier; the messages in the same order."""
    return [notifier.send(recipient, event) for notifier in notifiers]
