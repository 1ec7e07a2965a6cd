"""The lease's cancel token: a flag, with the Event behind ``wait`` made on first use."""

from __future__ import annotations

import threading

from echomq.model import CancelToken


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
