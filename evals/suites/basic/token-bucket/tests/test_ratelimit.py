import pytest

import ratelimit


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_fixed_window():
    clock = FakeClock()
    limiter = ratelimit.FixedWindowLimiter(2, 10, clock=clock)
    assert [limiter.allow() for _ in range(3)] == [True, True, False]
    clock.now += 10
    assert limiter.allow() is True


def test_bucket_starts_full_and_drains():
    clock = FakeClock()
    bucket = ratelimit.TokenBucket(rate_per_s=2.0, capacity=3, clock=clock)
    assert bucket.tokens == pytest.approx(3.0)
    assert [bucket.allow() for _ in range(4)] == [True, True, True, False]


def test_bucket_refills_up_to_capacity():
    clock = FakeClock()
    bucket = ratelimit.TokenBucket(rate_per_s=2.0, capacity=3, clock=clock)
    assert bucket.allow(3)
    clock.now += 0.5
    assert bucket.tokens == pytest.approx(1.0)
    clock.now += 100
    assert bucket.tokens == pytest.approx(3.0)


def test_refused_request_takes_nothing():
    clock = FakeClock()
    bucket = ratelimit.TokenBucket(rate_per_s=1.0, capacity=4, clock=clock)
    assert bucket.allow(3)
    assert bucket.allow(2) is False
    assert bucket.tokens == pytest.approx(1.0)
    assert bucket.allow(1)


def test_wait_time():
    clock = FakeClock()
    bucket = ratelimit.TokenBucket(rate_per_s=4.0, capacity=2, clock=clock)
    assert bucket.wait_time() == 0.0
    assert bucket.allow(2)
    assert bucket.wait_time(1) == pytest.approx(0.25)
    assert bucket.wait_time(2) == pytest.approx(0.5)
    clock.now += 0.25
    assert bucket.allow(1)


def test_invalid_arguments():
    with pytest.raises(ValueError):
        ratelimit.TokenBucket(rate_per_s=0, capacity=1)
    with pytest.raises(ValueError):
        ratelimit.TokenBucket(rate_per_s=1, capacity=0)
    bucket = ratelimit.TokenBucket(rate_per_s=1, capacity=2, clock=FakeClock())
    with pytest.raises(ValueError):
        bucket.allow(3)
    with pytest.raises(ValueError):
        bucket.wait_time(0)
