"""Score notes per player per round (decision 0049): at most one waiting note per (player,
round), telling every score not told yet in one message, at-least-once and never twice."""

from __future__ import annotations

from codemojex.domain import format_guess, score
from codemojex.service import Admitted, Services, submit
from codemojex.service.codec import Note, decode_note, note_id
from codemojex.service.reconcile import reconcile_once
from codemojex.service.scorenotes import ScoreNotes
from codemojex.wallet import record_score
from codemojex.workers import ConsoleDelivery, Delivered, NotifyWorker, ScoreWorker
from codemojex.workers.notify import DeliveryResult
from echomq import Ack, Completion, JobView, Verdict
from echomq.core.model import Lease
from tests.codemojex.game import PRICE, SECRET, make_player, make_round

GUESS = ("😀", "🤖", "😎", "👻", "🍕", "🐶")
OTHER = ("🐶", "😀", "🤖", "😎", "👻", "🐱")


class Recorder:
    """A delivery that keeps every message it was handed: (note id, note)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Note]] = []

    async def deliver(self, note_id: str, note: Note) -> DeliveryResult:
        self.sent.append((note_id, note))
        return Delivered()


async def _guess(services: Services, rid: str, player: str, emojis: tuple[str, ...]) -> str:
    return (await _charged(services, rid, player, emojis))[0]


async def _charged(services: Services, rid: str, player: str,
                   emojis: tuple[str, ...]) -> tuple[str, str]:
    """Submit a guess: its id and its text as charged (the player's locks overlaid)."""
    out = await submit(services, rid, player, emojis)
    assert isinstance(out, Admitted)
    return out.job_id, format_guess(out.guess)


async def _score_next(services: Services, worker: ScoreWorker) -> Lease:
    (lease,) = await services.scores.claim(1, lease_ms=10_000)
    assert isinstance(await worker.handle(lease), Ack)
    assert await services.scores.complete(lease) == Completion.COMPLETED  # the player's lane is free
    return lease


async def _told(services: Services, guess_ids: list[str]) -> dict[str, bool]:
    async with services.pool.connection() as conn:
        rows = await (await conn.execute("SELECT id, notified_at IS NOT NULL FROM guesses WHERE id = ANY(%s)",
                                         (guess_ids,))).fetchall()
    return {str(i): bool(t) for i, t in rows}


def _lease(services: Services, view: JobView) -> Lease:
    """The lease of a waiting note as a claim would hand it over (its due time not waited for)."""
    return Lease(services.notifications.name, view.id, view.attempts + 1, view.row["payload"],
                 view.row["lane"].decode(), 0)


async def test_two_guesses_before_the_note_is_delivered_make_one_message_listing_both(
        services: Services) -> None:
    player = await make_player(services.pool, PRICE * 2)
    rid = await make_round(services.pool)
    first, first_text = await _charged(services, rid, player, GUESS)
    second, second_text = await _charged(services, rid, player, OTHER)
    worker = ScoreWorker(services, note_delay_ms=60_000)  # the note waits: both scores find it
    await _score_next(services, worker)
    await _score_next(services, worker)
    assert worker.notes.skipped == 1  # the second score needed no admission at all
    (waiting,) = await services.notifications.browse("delayed")  # one job for the two guesses
    assert (await services.notifications.stats()).total == 1
    note = decode_note(waiting.row["payload"])
    assert (note.kind, note.player, note.round_id, note.guess) == ("score", player, rid, "")
    recorder = Recorder()
    assert isinstance(await NotifyWorker(recorder, pool=services.pool).handle(_lease(services, waiting)), Ack)
    ((_, message),) = recorder.sent  # one message...
    assert first_text in message.text and second_text in message.text  # ...listing both
    assert message.amount == max(score(SECRET, GUESS).total, score(SECRET, OTHER).total)  # the best
    assert await _told(services, [first, second]) == {first: True, second: True}


async def test_a_redelivered_note_tells_nothing_twice(services: Services) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    gid = await _guess(services, rid, player, GUESS)
    await _score_next(services, ScoreWorker(services, note_delay_ms=60_000))
    (waiting,) = await services.notifications.browse("delayed")
    recorder = Recorder()
    notifier = NotifyWorker(recorder, pool=services.pool)
    lease = _lease(services, waiting)
    assert isinstance(await notifier.handle(lease), Ack)  # delivered and stamped; its ack lost, say
    assert isinstance(await notifier.handle(lease), Ack)  # the re-delivery of the same note
    assert len(recorder.sent) == 1 and notifier.told == 1 and notifier.empty == 1  # nothing sent again
    assert await _told(services, [gid]) == {gid: True}


async def test_a_score_stored_while_its_note_runs_gets_a_note_behind_it(services: Services) -> None:
    """A running note may have read the untold scores already: a later score is not folded into
    it (the debounce leaves a running holder alone) but admitted behind it on the player's lane."""
    player = await make_player(services.pool, PRICE * 2)
    rid = await make_round(services.pool)
    first = await _guess(services, rid, player, GUESS)
    second = await _guess(services, rid, player, OTHER)
    worker = ScoreWorker(services, note_delay_ms=0)
    await _score_next(services, worker)
    (running,) = await services.notifications.claim(1, lease_ms=10_000)
    recorder = Recorder()
    notifier = NotifyWorker(recorder, pool=services.pool)
    await _score_next(services, worker)  # the first note holds the lane: this one waits behind it
    assert (await services.notifications.stats()).total == 2
    assert await services.notifications.claim(1, lease_ms=10_000) == []  # the lane is held
    # The running note was claimed before the second score: it tells what it reads now (both).
    assert isinstance(await notifier.handle(running), Ack)
    assert await services.notifications.complete(running) == Completion.COMPLETED
    (behind,) = await services.notifications.claim(1, lease_ms=10_000)
    assert isinstance(await notifier.handle(behind), Ack)
    assert len(recorder.sent) == 1 and notifier.empty == 1  # nothing was left for it to tell twice
    assert await _told(services, [first, second]) == {first: True, second: True}


async def test_a_crash_between_scoring_and_the_note_still_tells_the_score(services: Services) -> None:
    """The score is committed and the process dies before any note is admitted: the player's
    next score note tells it, and without one the reconciler admits a note that does."""
    player = await make_player(services.pool, PRICE * 3)
    rid = await make_round(services.pool)
    lost, lost_text = await _charged(services, rid, player, GUESS)
    await record_score(services.pool, lost, score(SECRET, GUESS).total)  # stored; no note (the crash)
    (orphan,) = await services.scores.claim(1, lease_ms=10_000)
    await services.scores.complete(orphan)  # and the guess's job is gone too: nothing re-runs it
    assert (await services.notifications.stats()).total == 0
    # 1. The next score of the player in the round: its note tells both.
    later, later_text = await _charged(services, rid, player, OTHER)
    await _score_next(services, ScoreWorker(services, note_delay_ms=0))
    (note,) = await services.notifications.claim(1, lease_ms=10_000)
    recorder = Recorder()
    assert isinstance(await NotifyWorker(recorder, pool=services.pool).handle(note), Ack)
    await services.notifications.complete(note)
    ((_, message),) = recorder.sent
    assert lost_text in message.text and later_text in message.text
    assert await _told(services, [lost, later]) == {lost: True, later: True}
    # 2. No later score: the reconciler finds the score untold and admits a note, once.
    first = await reconcile_once(services, min_age_s=3600)  # the watermark starts here
    alone, alone_text = await _charged(services, rid, player, GUESS)
    await record_score(services.pool, alone, 1)
    (orphan,) = await services.scores.claim(1, lease_ms=10_000)
    await services.scores.complete(orphan)
    done = await reconcile_once(services, notes_after=first.notes_checked, min_age_s=0)
    assert done.renotified == 1
    again = await reconcile_once(services, notes_after=done.notes_checked, min_age_s=0)
    assert again.renotified == 0  # each scored guess is checked once
    (note,) = await services.notifications.claim(1, lease_ms=10_000)
    assert isinstance(await NotifyWorker(recorder, pool=services.pool).handle(note), Ack)
    assert len(recorder.sent) == 2 and alone_text in recorder.sent[1][1].text
    assert await _told(services, [alone]) == {alone: True}


async def test_admissions_name_the_holder_another_process_left(services: Services) -> None:
    """Two processes' note writers for one (player, round): the second, who has not seen the
    holder, names it on its second try (inside echomq's admit_held_many) and replaces it (one
    waiting note, not two), and then knows the holder."""
    player = await make_player(services.pool, PRICE * 2)
    rid = await make_round(services.pool)
    a, b = await _guess(services, rid, player, GUESS), await _guess(services, rid, player, OTHER)
    one, two = ScoreNotes(services.notifications), ScoreNotes(services.notifications)
    assert await one.admit([(player, rid, a)], delay_ms=60_000) == [Verdict.ENQUEUED]
    assert await two.admit([(player, rid, b)], delay_ms=60_000) == [Verdict.REPLACED]
    assert (await services.notifications.stats()).total == 1
    assert two.holders[(player, rid)][0] == note_id(a)  # the holder the retry named
    assert two.holders[(player, rid)][0] == one.holders[(player, rid)][0]


async def test_the_console_counts_one_message_for_a_burst(services: Services) -> None:
    player = await make_player(services.pool, PRICE * 3)
    rid = await make_round(services.pool)
    for emojis in (GUESS, OTHER, GUESS):
        await _guess(services, rid, player, emojis)
    worker = ScoreWorker(services, note_delay_ms=60_000)
    for _ in range(3):
        await _score_next(services, worker)
    (waiting,) = await services.notifications.browse("delayed")
    console = ConsoleDelivery(write=None)
    assert isinstance(await NotifyWorker(console, pool=services.pool).handle(_lease(services, waiting)), Ack)
    assert console.counts["score"] == 1 and worker.notes.skipped == 2
