"""The lease's cancel token: a flag, with the Event behind ``wait`` made on first use."""

from __future__ import annotations

import threading

from echomq.core.model import CancelToken


def test_a_token_set_before_any_wait_answers_at_once() -> None:
    token = CancelToken()
    assert not token.is_set() and token.wait(0) is False
    token.set()
    assert token.is_set() and token.wait(0) is True and token.wait() is True


def test_a_waiting_thread_wakes_when_another_sets_the_token() -> None:
    token = CancelToken()
    woke: list[bool] = []
    waiting = [threading.Thread(target=lambda: woke.append(token.wait(10))) for _ in range(4)]
    for t in waiting:
        t.start()
    token.set()
    for t in waiting:
        t.join(10)
    assert woke == [True] * 4 and not any(t.is_alive() for t in waiting)


def test_wait_times_out_false_while_nobody_sets_it() -> None:
    token = CancelToken()
    assert token.wait(0.01) is False and not token.is_set()
    assert repr(token) == "CancelToken(set=False)"


def test_a_claims_fast_lease_equals_the_keyword_construction() -> None:
    from dataclasses import FrozenInstanceError

    import pytest

    from echomq.core.model import Lease, new_lease

    for lane, timeout in ((None, None), ("lane-a", 1500)):
        fast = new_lease("q", "JOB01", 3, b"p", lane, 1234, timeout)
        slow = Lease(queue="q", id="JOB01", attempt=3, payload=b"p", lane=lane, deadline_ms=1234,
                     timeout_ms=timeout)
        assert fast == slow and repr(fast) == repr(slow) and hash(fast) == hash(slow)
        assert isinstance(fast.cancel, CancelToken) and not fast.cancel.is_set()
        with pytest.raises(FrozenInstanceError):
            fast.attempt = 4  # type: ignore[misc]
    a, b = new_lease("q", "J", 1, b"", None, 1, None), new_lease("q", "J", 1, b"", None, 1, None)
    assert a.cancel is not b.cancel  # each lease its own token
