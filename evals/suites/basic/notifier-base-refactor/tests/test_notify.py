import pytest

import notify
from notify import EmailNotifier, Event, SmsNotifier

DISK = Event("warning", "Disk", "91% full")


def test_email_message():
    email = EmailNotifier("ops@example.com")
    message = email.send("dev@example.com", DISK)
    assert message == "From: ops@example.com\nTo: dev@example.com\n\n[WARNING] Disk: 91% full"
    assert email.sent == [message]


def test_sms_message_is_truncated():
    sms = SmsNotifier()
    assert sms.send("+100", DISK) == "+100: [WARNING] Disk: 91% full"
    long = sms.send("+100", Event("info", "T", "x" * 200))
    text = long.split(": ", 1)[1]
    assert len(text) == 160 and text.endswith("...") and text.startswith("[INFO] T: xxx")
    assert len(sms.sent) == 2


def test_notify_all():
    messages = notify.notify_all([SmsNotifier(), EmailNotifier("a@x")], "b", DISK)
    assert messages == ["b: [WARNING] Disk: 91% full", "From: a@x\nTo: b\n\n[WARNING] Disk: 91% full"]


def test_notifiers_share_the_base_class():
    for cls in (EmailNotifier, SmsNotifier):
        assert issubclass(cls, notify.Notifier)
        assert "format_message" not in vars(cls)
        assert "send" not in vars(cls)
        assert "deliver" in vars(cls)


def test_base_is_abstract_and_reusable():
    with pytest.raises(TypeError):
        notify.Notifier()

    class Echo(notify.Notifier):
        def deliver(self, recipient, text):
            return f"{recipient}<-{text}"

    echo = Echo()
    assert echo.send("me", DISK) == "me<-[WARNING] Disk: 91% full"
    assert echo.sent == ["me<-[WARNING] Disk: 91% full"]


def test_empty_body_is_omitted_everywhere():
    event = Event("info", "Deployed", "")
    assert SmsNotifier().send("+1", event) == "+1: [INFO] Deployed"
    assert EmailNotifier("a").send("b", event).endswith("\n\n[INFO] Deployed")
