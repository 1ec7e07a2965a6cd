"""``submit``: the validate-then-admit door of a guess.

Guarantees:

* For **any** round, player and guess (any types, random bytes, invalid UTF-8,
  huge strings, other players' or rounds' ids) :func:`submit` returns either :class:`Admitted`
  or exactly one :class:`~codemojex.domain.errors.Reason`. It never raises: a transient
  PostgreSQL failure (a dropped connection, a restart, a deadlock victim) is retried
  inside one bound for the whole call (the wallet's retry policy, 30 s by default);
  past it, or on any other database failure, it returns ``Reason.UNAVAILABLE``
  (decision 0009): nothing was decided, and a retry with the same key is safe.
* A rejection mints nothing and charges nothing: no guess row, no ledger row,
  no job. (An unknown player has no wallet, so it is refused as ``insufficient``.)
* On success, in order: a ``JOB`` id is minted; the guess joins the charges submitted
  alongside it (:mod:`codemojex.service.charges`: one transaction per group, each guess
  checked, refused or charged alone) where the player's locked positions are overlaid
  (``Locks.merge``), the wallet charged and the guess recorded under that id (lock,
  check, debit, ledger pair, guess row), and its job written into the game's outbox
  (``cm_outbox``, under the same id, for the player's serial lane of queue ``cm``): the
  job exists if and only if the charge commits (echomq.outbox, decision 0034).
* Once the charge has committed the guess is accepted, and its admission with it: the
  group admits its jobs at once under their ids (the fast path, one ``admit_many`` per
  group), and the scorer deletes a scored guess's outbox row. The game's relay takes only
  rows older than ``codemojex.game.app.RELAY_MIN_AGE_MS``: those of a process that died
  between the commit and its admission; it admits each, once, however often it is killed
  (and the queue refuses a late one as a DUPLICATE). ``Admitted.queued`` says whether
  this call's group admitted it.

Idempotency. A caller that may run twice for one intent (the bot's command
consumer re-runs a command after a crash; a client retrying after a lost reply)
passes ``key`` (any string naming the intent; the guess id is derived from it) or
``guess_id`` (a deterministic ``JOB`` id). A second call with the same key charges
nothing and answers :class:`Admitted` with the stored guess and ``queued=False``
(admitting it if the first call could not). Without a key, a retry *inside* one
call (after a lost commit reply) reuses the id minted for it, so it too charges once.

Rejection order (first that applies): ``no_round``, ``closed`` (not open, or
not yet opened), ``expired`` (past its closing time), ``bad_guess``,
``insufficient``. The charge re-checks the round on the database clock, so a
round that closes between the check and the charge is still refused.

One read of the round. ``submit`` reads the round once; a caller that already holds
it (the bot read the current round from the cache tier to word its reply) passes it
as ``rnd`` and ``submit`` reads it not at all: the checks above run on it, and the
charge's own check on the database clock stays the word that counts.

The detail of a refusal. With ``explain=True`` a refusal comes back as
:class:`Refusal` (the reason and, for ``bad_guess``, what is wrong with the guess),
so a caller words its answer without parsing the guess again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, overload

from codemojex.domain import BadGuess, Guess, parse_guess, validate_guess
from codemojex.domain.emoji import default_set
from codemojex.domain.errors import ConfigurationError, DatabaseError, Reason
from codemojex.service.charges import outbox_job
from codemojex.service.codec import GuessJob, derive_id, encode
from codemojex.service.context import Services
from codemojex.wallet import (
    AlreadyCharged,
    Charged,
    Insufficient,
    Round,
    RoundRefused,
    balance,
    get_guess,
    get_round,
    within,
)
from codemojex.wallet.batch import ChargeItem
from echomq import ids, outbox

__all__ = ["MAX_ID_LENGTH", "Admitted", "Refusal", "clean_id", "guess_job", "submit"]

log = logging.getLogger("codemojex.guesses")

MAX_ID_LENGTH = 128  # player and round ids are short tokens; anything longer is not one of ours
MAX_GUESS_BYTES = 4096  # six emojis (even ZWJ families) fit many times over


@dataclass(frozen=True, slots=True)
class Admitted:
    """The guess was charged and accepted as job ``job_id`` (its guess id).

    ``guess`` is what was charged (locks overlaid); ``balance`` the player's new
    balance; ``queued`` False if the admission onto ``cm`` is left to the outbox's relay.
    """

    job_id: str
    guess: Guess
    balance: int
    queued: bool = True


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refused guess (``submit(..., explain=True)``): the reason and what was wrong."""

    reason: Reason
    detail: str = ""


def _refused(reason: Reason, detail: str = "") -> Refusal:
    return Refusal(reason, detail or reason.value.replace("_", " "))


def clean_id(value: object) -> str | None:
    """``value`` if it can be an id stored in PostgreSQL and used as a lane, else None."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID_LENGTH:
        return None
    if "\x00" in value or not value.isprintable() or value != value.strip():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return None
    return value


def _parse(raw: object, round_set: str) -> Guess | BadGuess:
    emoji_set = default_set(round_set)
    if emoji_set is None:
        return BadGuess(f"unknown emoji set {round_set!r}")
    if isinstance(raw, bytes | bytearray | memoryview):
        data = bytes(raw)
        if len(data) > MAX_GUESS_BYTES:
            return BadGuess("a guess is too long")
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError:
            return BadGuess("a guess is UTF-8 text")
    if isinstance(raw, str):
        return parse_guess(raw, emoji_set)
    if isinstance(raw, Sequence) and len(raw) <= 64 and all(isinstance(e, str) for e in raw):
        return validate_guess(list(raw), emoji_set)
    return BadGuess("a guess is text or a sequence of emojis")


@overload
async def submit(services: Services, round_id: object, player: object, guess: object, *,
                 guess_id: str | None = None, key: str | None = None, rnd: Round | None = None,
                 explain: Literal[False] = False) -> Admitted | Reason: ...
@overload
async def submit(services: Services, round_id: object, player: object, guess: object, *,
                 guess_id: str | None = None, key: str | None = None, rnd: Round | None = None,
                 explain: Literal[True]) -> Admitted | Refusal: ...
async def submit(services: Services, round_id: object, player: object, guess: object, *,
                 guess_id: str | None = None, key: str | None = None, rnd: Round | None = None,
                 explain: bool = False) -> Admitted | Reason | Refusal:
    """Turn an untrusted guess into an admitted job or one closed error (see module doc).

    ``key`` (a non-empty string up to 128 characters) or ``guess_id`` (a valid ``JOB``
    id) makes a repeated call idempotent: charged once. Give at most one; a malformed
    one is a programming error (:class:`~codemojex.domain.errors.ConfigurationError`), raised
    before anything is read or written. ``rnd``: the round ``round_id`` names, already
    read by the caller (it must be that round). ``explain``: a refusal as :class:`Refusal`.
    """
    job_id = _job_id(guess_id, key)
    if rnd is not None and rnd.id != round_id:
        raise ConfigurationError(f"rnd is round {rnd.id!r}, not {round_id!r}")
    try:
        with within():  # one bound for every wallet call this submission makes
            out = await _submit(services, round_id, player, guess, job_id, rnd)
    except DatabaseError as exc:  # Unavailable past the bound, or a failure no retry helps
        log.warning("submit: PostgreSQL unavailable (%s); nothing decided", exc)
        out = _refused(Reason.UNAVAILABLE)
    if isinstance(out, Admitted) or explain:
        return out
    return out.reason


def _job_id(guess_id: str | None, key: str | None) -> str | None:
    if guess_id is not None and key is not None:
        raise ConfigurationError("give guess_id or key, not both")
    if guess_id is not None and not (ids.valid(guess_id) and guess_id.startswith("JOB")):
        raise ConfigurationError(f"guess_id must be a JOB branded id, not {guess_id!r}")
    if key is not None:
        if clean_id(key) is None:
            raise ConfigurationError(f"key must be a printable string of 1..{MAX_ID_LENGTH} characters")
        return derive_id("JOB", "submit", key)
    return guess_id


async def _submit(services: Services, round_id: object, player: object, guess: object,
                  job_id: str | None, rnd: Round | None) -> Admitted | Refusal:
    rid = clean_id(round_id)
    if rid is not None and rnd is None:
        rnd = await get_round(services.pool, rid)  # the one read of the round
    if rid is None or rnd is None:
        return _refused(Reason.NO_ROUND)
    now = datetime.now(UTC)
    if rnd.state != "open" or now < rnd.opens_at:
        return _refused(Reason.CLOSED)
    if now >= rnd.closes_at:
        return _refused(Reason.EXPIRED)
    parsed = _parse(guess, rnd.emoji_set)
    if isinstance(parsed, BadGuess):
        return _refused(Reason.BAD_GUESS, parsed.detail)
    pid = clean_id(player)
    if pid is None:
        return _refused(Reason.INSUFFICIENT)  # no such wallet: nothing to charge
    # The success branch: mint the id at acceptance (or derive it from the caller's key);
    # it is the guess row's key, the charge's ledger ref and the job id, so every later
    # retry, the wallet's own included, is idempotent. The charge overlays the player's
    # locks (``Locks.merge``) inside its transaction, with the guesses submitted alongside.
    job_id = job_id or ids.generate("JOB")
    charged, emojis, queued = await services.charges.charge(rid, ChargeItem(pid, job_id, parsed))
    if isinstance(charged, AlreadyCharged):  # a repeat (or a retry after a lost commit reply)
        return await _repeat(services, job_id, pid, rid, emojis)
    if isinstance(charged, RoundRefused):
        return _refused(charged.reason)
    if isinstance(charged, Insufficient):
        return _refused(Reason.INSUFFICIENT)
    if not isinstance(charged, Charged):  # UnknownPlayer
        return _refused(Reason.INSUFFICIENT)
    return Admitted(job_id, emojis, charged.balance, queued)


async def _repeat(services: Services, job_id: str, pid: str, rid: str,
                  emojis: Guess) -> Admitted | Refusal:
    """The answer to a repeated key: the stored guess, charged once; admitted now (the fast
    path again) while its outbox row still waits for the relay."""
    stored = await get_guess(services.pool, job_id)
    if stored is None or stored.player != pid or stored.round_id != rid:
        # The key names another player's or round's guess: not this intent.
        return _refused(Reason.BAD_GUESS, "this key names another guess")
    queued = False
    if not stored.admitted:
        queued = await admit_guess(services, job_id, GuessJob(rid, pid, stored.emojis))
    current = await balance(services.pool, pid)
    return Admitted(job_id, stored.emojis, current or 0, queued)


async def admit_guess(services: Services, job_id: str, job: GuessJob) -> bool:
    """The fast path: admit a charged guess onto its player's serial lane at once, under its
    id (its outbox row, committed with the charge, is the guarantee; the relay finds this
    admission a DUPLICATE). False, leaving it to the relay, if Valkey fails."""
    try:
        await services.scores.admit(job_id, encode(job), lane=job.player, serial=True)
    except Exception as exc:  # the charge and its outbox row stand; the relay admits it
        log.warning("guess %s charged but not admitted (%r); left to the outbox's relay", job_id, exc)
        return False
    return True


def guess_job(services: Services, job_id: str, job: GuessJob) -> outbox.OutboxJob:
    """The outbox row of a charged guess: its id, on its player's serial lane of ``cm`` (of
    the shard that lane lives on when the queue is sharded)."""
    return outbox_job(services.scores, job_id, job)
