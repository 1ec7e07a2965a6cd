"""Mutation check of the Lua: remove each fence, deadline and threshold check, one at a
time, and see the model test (tests/echomq/model_machine.py) catch it.

    python scripts/mutation_check.py [--runs 20] [--need 19] [--examples 12] [--steps 40]
                                     [--jobs 2] [--only NAME[,NAME...]]
                                     [--report docs/mutation.md [--update]]

For each mutant the package is copied to a temporary directory with one Lua line
changed, and a child process (``PYTHONPATH`` pointing at the copy; it checks that the
copy is what it imported) runs the model test ``--runs`` times with fresh random seeds,
generation only (no shrinking, no example database), on one embedded server, and the
mutant's targeted probes (``Mutant.probes``, tests/echomq/mutation_probes.py), which drive
its fenced case directly. A run that fails kills the mutant. The unmutated package runs
the same way first (with every probe): it must pass every run, or a kill would mean
nothing.

Every mutant names its file and the exact text it changes; a target that is missing or
ambiguous stops the script before anything runs (tests/echomq/test_mutation_targets.py
checks the same on every test run), so a refactor of the Lua cannot disarm a mutant
silently. Every Lua line marked ``-- fence:`` or ``-- threshold:`` must be the target
of a mutant, or be listed in EQUIVALENT with the reason no test can tell it apart.

Exit status 0 when the baseline passes and every mutant is killed in at least
``--need`` of ``--runs`` runs; the markdown table goes to ``--report`` and stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "echomq"
MARKERS = ("-- fence:", "-- threshold:")
_DEDUPE = "tests/echomq/_async/test_dedupe.py"


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # under src/echomq/protocol/lua/
    old: str  # exact text, found on exactly one line of the file
    new: str  # what it becomes ('' removes it)
    why: str
    test: str = ""  # a pytest node that kills it instead of the model machine (below)
    # Targeted probes (tests/echomq/mutation_probes.py) run in every run besides the model
    # test: each drives the fenced case directly, so the kill does not wait on random steps.
    probes: tuple[str, ...] = ()
    model: bool = True  # False: the model test never runs this script (only the probes)


def _guard(script: str, what: str, old: str, probes: tuple[str, ...] = ()) -> Mutant:
    """One fence line (``if row[2] ~= ARGV[2] then return 0 end``) removed."""
    return Mutant(f"{script}: no {what} check", f"{script}.lua", old, "", f"{what} check removed",
                  probes=probes)


MUTANTS: list[Mutant] = [
    *(m for s, d in (("heartbeat", "current"), ("complete", "deadline"), ("retry", "current"),
                     ("progress", "deadline"))
      for m in (
          _guard(s, "attempt token", "if row[2] ~= ARGV[2] then return 0 end"),
          _guard(s, "lease deadline", f"if tonumber({d}) < now then return 0 end",
                 probes=("expired_lease_is_refused",)),
      )),
    # a consumer's beat, one call for all its leases (decision 0055): each lease under
    # heartbeat's own fences, one reply each; killed by the model's heartbeat_many step and
    # by the probe that mixes every kind of lease in one call
    Mutant("heartbeat_batch: no attempt token check", "heartbeat_batch.lua",
           "live = live and row[2] == ARGV[2 * i + 1]", "", "attempt token check removed",
           probes=("heartbeat_batch_answers_as_heartbeat",)),
    Mutant("heartbeat_batch: no lease deadline check", "heartbeat_batch.lua",
           "live = live and (fresh or tonumber(current[i]) >= now)", "", "deadline check removed",
           probes=("heartbeat_batch_answers_as_heartbeat",)),
    Mutant("heartbeat_batch: takes every lease for live", "heartbeat_batch.lua",
           "local fresh = first and tonumber(first) >= now", "local fresh = true",
           "the earliest-lease shortcut skips the deadline check always",
           probes=("heartbeat_batch_answers_as_heartbeat",)),
    Mutant("heartbeat_batch: no cancel sign", "heartbeat_batch.lua",
           "out[i] = live and (row[3] and -deadline or deadline) or 0", "out[i] = live and deadline or 0",
           "a job asked to stop is never told at its beat",
           probes=("heartbeat_batch_answers_as_heartbeat",)),
    Mutant("heartbeat_batch: no batch bound", "heartbeat_batch.lua",
           "if n < 1 or n > 256 then", "if n < 1 then",
           "an unbounded batch (and unpack) accepted", probes=("heartbeat_batch_is_bounded",)),
    Mutant("heartbeat_batch: batch bound one late", "heartbeat_batch.lua",
           "if n < 1 or n > 256 then", "if n < 1 or n > 257 then",
           "the bound off by one", probes=("heartbeat_batch_is_bounded",)),
    Mutant("heartbeat_batch: no lease_ms bound", "heartbeat_batch.lua",
           "if not lease or lease < 1 or lease > 86400000 or lease ~= math.floor(lease) then",
           "if not lease then", "a zero, negative, fractional or too long lease accepted",
           "tests/echomq/_async/test_heartbeat_batch.py::test_a_malformed_element_refuses_the_whole_batch"),
    Mutant("heartbeat_batch: job keys not checked against the ids", "heartbeat_batch.lua",
           "if KEYS[i + 2] ~= prefix .. ids[i] then", "if false then",
           "an undeclared key: the id extended is not the row read",
           "tests/echomq/_async/test_heartbeat_batch.py::test_a_malformed_element_refuses_the_whole_batch"),
    Mutant("complete_batch: no attempt token check", "complete_batch.lua",
           "live = live and row[2] == attempt", "", "attempt token check removed"),
    Mutant("complete_batch: no lease deadline check", "complete_batch.lua",
           "live = live and (fresh or tonumber(deadline) >= now)", "", "deadline check removed"),
    Mutant("complete_batch: takes every lease for live", "complete_batch.lua",
           "local fresh = first and tonumber(first) >= now", "local fresh = true",
           "the earliest-lease shortcut (issue 30) skips the deadline check always"),
    # cancellation (decision 0023): an attempt of a job asked to stop never ends it done,
    # never puts it back to run again, and a reaped one ends cancelled, not pending/dead
    Mutant("complete: completes a job asked to stop", "complete.lua",
           "if row[4] then ended(KEYS[2], KEYS[3], ARGV[1], now) return 2 end", "",
           "cancel check removed"),
    Mutant("complete_batch: completes a job asked to stop", "complete_batch.lua",
           "out[i] = live and (row[4] and 2 or 1) or 0", "out[i] = live and 1 or 0",
           "cancel check removed"),
    Mutant("retry: a give-up waits for the limit", "retry.lua",
           "if ARGV[6] == 'dead' then failures = math.huge end -- given up: dead now", "",
           "give-up check removed"),
    Mutant("retry: retries a job asked to stop", "retry.lua",
           "if row[6] then -- fence: a cancel was asked", "if false then", "cancel check removed"),
    Mutant("reap: requeues a job asked to stop", "reap.lua",
           "if row[1] and row[5] then -- fence: a cancel was asked", "if false then",
           "cancel check removed"),
    Mutant("reap: reaps live leases", "reap.lua",
           "if deadline and tonumber(deadline) <= now then", "if deadline then",
           "lease expiry check removed"),
    Mutant("promote: promotes jobs not yet due", "promote.lua",
           "if due and tonumber(due) <= now then", "if due then", "due time check removed"),
    Mutant("purge: deletes rows younger than the keep window", "purge.lua",
           "if at and tonumber(at) <= cutoff then", "if at then", "age check removed"),
    *(m for s in ("retry", "reap") for m in (
        Mutant(f"{s}: never dead", f"{s}.lua", "if failures >= (tonumber(row[3]) or limit) then",
               "if false then", "failure limit comparison removed"),
        Mutant(f"{s}: dead one failure late", f"{s}.lua",
               "if failures >= (tonumber(row[3]) or limit) then",
               "if failures > (tonumber(row[3]) or limit) then", "limit off by one"),
        Mutant(f"{s}: ignores the job's own limit", f"{s}.lua",
               "if failures >= (tonumber(row[3]) or limit) then",
               "if failures >= limit then", "per-job max_attempts ignored",
               probes=("reap_applies_the_jobs_own_limit",) if s == "reap"
               else ("retry_applies_the_jobs_own_limit",)),
    )),
    Mutant("schedule: admits ticks not yet due", "schedule.lua",
           "if tick > now then break end", "", "server clock check removed"),
    Mutant("schedule: admits ticks at or below the mark", "schedule.lua",
           "if not mark or tick > mark then", "if true then", "mark fence removed"),
    Mutant("fence: lets another major version through", "include/fence.lua",
           "if theirs ~= ours then -- fence: another major version", "if false then",
           "version fence removed from every script at once (the include they all run)"),
    # claim itself (issue 29 item 6): the serial lane, the state it leases from, the fencing token
    Mutant("claim: a serial lane runs two jobs at once", "claim.lua",
           "elseif not (serial and (call('HGET', KEYS[5], lane) or id) ~= id)"
           " and (not g.on or gate_take(g, lane)) then",
           "elseif (not g.on or gate_take(g, lane)) then", "the serial lane's holder check removed"),
    Mutant("claim: leases a candidate that is not pending", "claim.lua",
           "if score and leased < count and not seen[id] then", "if leased < count and not seen[id] then",
           "the pending-state check removed (an active, done or dead job is leased again)",
           probes=("claim_leases_only_pending_jobs",)),
    Mutant("claim: the attempt is not incremented", "claim.lua",
           "local attempt = tonumber(tries or '0') + 1", "local attempt = tonumber(tries or '0')",
           "the fencing token stays the same across attempts"),
    # expiry (decision 0045): a job past its deadline never runs, one before it never expires
    Mutant("claim: leases a job past its deadline (expiry)", "claim.lua",
           "elseif exp and tonumber(exp) <= now then", "elseif false then",
           "the deadline check removed: an expired job runs late"),
    Mutant("claim: never reads a deadline (expiry)", "claim.lua",
           "local timed = call('EXISTS', KEYS[10]) == 1", "local timed = false",
           "deadlines unread: an expired job runs late"),
    Mutant("expire: expires jobs whose deadline has not passed (expiry)", "expire.lua",
           "if at and tonumber(at) <= now then", "if at then",
           "the reaper's deadline check removed"),
    # a plain queue (issue 30 item 1): the claim skips the lane, priority and timeout fields
    # while meta records 'plain'; every admission of a job with one of them clears it
    Mutant("claim: reads every queue as plain", "include/gate.lua",
           "local plain = m[6] == '1'", "local plain = true",
           "lanes, serial lanes, priorities and timeouts unread",
           probes=("options_on_a_plain_queue_are_read",)),
    Mutant("claim: a plain queue ignores a waiting line", "claim.lua",
           "local plain = g.plain and call('EXISTS', KEYS[3]) == 0", "local plain = g.plain",
           "an older client's serial-lane job leased without its lane",
           probes=("an_older_clients_lane_is_read",), model=False),
    Mutant("steps: a flow step's options leave the queue plain", "include/steps.lua",
           "if ARGV[3] ~= '' or tonumber(ARGV[7]) > 0 or ARGV[8] ~= '' then", "if false then",
           "a flow step leased without its timeout",
           probes=("flow_step_options_on_a_plain_queue_are_read",), model=False),
    Mutant("admit: a job's options leave the queue plain", "include/options.lua",
           "if not plain then redis.call('HDEL', meta, 'plain') -- fence: the claim reads this job's options",
           "if false then", "a job leased without its timeout",
           probes=("options_on_a_plain_queue_are_read",)),
    Mutant("schedule: a scheduled job's options leave the queue plain", "schedule.lua",
           "if ARGV[4] ~= '' or ARGV[7] ~= '' or ARGV[8] ~= '0' then",
           "if false then", "a scheduled job leased without its timeout",
           probes=("scheduled_options_on_a_plain_queue_are_read",), model=False),
    Mutant("import_row: an imported row's options leave the shard plain", "import_row.lua",
           "if lane or prio or timeout then redis.call('HDEL', KEYS[4], 'plain') end",
           "", "a moved job leased without its timeout",
           probes=("imported_options_on_a_plain_queue_are_read",), model=False),
    # the finish of a bare queue (decision 0050): complete and complete_batch read no lane,
    # cancel or parent field while meta records 'bare' (and 'plain', for the lane); every
    # script that gives a row a parent or a cancel request clears 'bare'
    *(m for s in ("complete", "complete_batch") for m in (
        Mutant(f"{s}: reads every job as bare", f"{s}.lua",
               "local bare = m[3] == '1' -- fence: no row has a parent or a cancel request",
               "local bare = true", "cancel requests and parents unread at the finish",
               probes=("a_cancel_on_a_bare_queue_is_read",
                       "a_flow_child_on_a_bare_queue_tells_its_parent")),
        Mutant(f"{s}: reads a bare queue's lanes as absent", f"{s}.lua",
               "local lean = bare and m[2] == '1' -- fence: nor a lane", "local lean = bare",
               "a serial lane never released", probes=("a_lane_on_a_plain_queue_is_released",)),
    )),
    Mutant("cancel: a request leaves the queue bare", "cancel.lua",
           "if asked then redis.call('HDEL', KEYS[5], 'bare') end", "",
           "a job asked to stop completes done", probes=("a_cancel_on_a_bare_queue_is_read",)),
    Mutant("flow_hold: a child leaves the queue bare", "flow_hold.lua",
           "redis.call('HDEL', KEYS[3], 'bare') -- fence: the finish reads this job's parent", "",
           "a child's parent never told", probes=("a_flow_child_on_a_bare_queue_tells_its_parent",),
           model=False),
    Mutant("flow_admit: an inner parent leaves the queue bare", "flow_admit.lua",
           "if ARGV[11] ~= '' then redis.call('HDEL', KEYS[3], 'bare') end", "",
           "an inner parent's own parent never told",
           probes=("an_inner_parent_on_a_bare_queue_tells_its_parent",), model=False),
    Mutant("import_row: an imported parent leaves the shard bare", "import_row.lua",
           "if parent or asked then redis.call('HDEL', KEYS[4], 'bare') end", "",
           "a moved child's parent never told",
           probes=("an_imported_parent_on_a_bare_queue_is_read",), model=False),
    Mutant("claim: an older client's lane leaves the queue plain", "claim.lua",
           "if heal and (lane or prio or timeout) then", "if false then",
           "an older client's serial lane never released",
           probes=("an_older_clients_lane_is_released",), model=False),
    # the claim gate (include/gate.lua, run by claim) and priority aging (include/pend.lua)
    Mutant("gate: a paused queue still leases", "include/gate.lua",
           "if g.paused then return false end", "", "pause check removed"),
    Mutant("gate: no queue rate limit", "include/gate.lua",
           "if t and t + g.qms > g.now then", "if false then", "queue rate threshold removed"),
    Mutant("gate: queue rate limit one late", "include/gate.lua",
           "local back = g.qmax - g.used - 1", "local back = g.qmax - g.used",
           "queue rate off by one", probes=("queue_rate_limit_is_exact",)),
    Mutant("gate: no lane rate limit", "include/gate.lua",
           "if t and t + g.lms > g.now then", "if false then", "lane rate threshold removed",
           probes=("lane_rate_limit_holds",)),
    Mutant("handoff: no claim gate", "include/handoff.lua",
           "if g.on and not gate_take(g, nil) then return false end", "",
           "hand-off bypasses pause and the queue rate limit (the model's park_then_enqueue "
           "step; tests/echomq/test_handoff.py's gate tests kill it too)"),
    Mutant("pend: priority without aging", "include/pend.lua",
           "score = score - prio * AGE", "score = score - prio * 1e12",
           "strict priority bands (a lower level could starve)"),
    Mutant("pend: priority ignored", "include/pend.lua",
           "score = score - prio * AGE", "score = score", "priority not applied"),
    # flows (decision 0038): killed by the flow machine (tests/echomq/model_flows.py)
    # the settle (include/flows.lua) is one code for both paths: a same-slot child's own
    # script (complete, complete_batch, retry, reap, cancel, expire, claim) and the relay's
    # flow_parent settle (decision 0041); the same-slot probes drive the new path directly
    Mutant("flows: releases without the last child (same slot and relay)", "include/flows.lua",
           "if settled < tonumber(row[2]) then return verdict or 1 end",
           "if settled < tonumber(row[2]) - 1 then return verdict or 1 end", "release one child early",
           probes=("flow_same_slot_release_waits_for_the_last_child",)),
    Mutant("flows: counts a repeated notice (double release)", "include/flows.lua",
           "if redis.call('HGET', job, field) ~= '' then return verdict or 0 end", "",
           "the once-per-child check removed",
           probes=("flow_notice_counts_once", "flow_same_slot_release_waits_for_the_last_child")),
    Mutant("flows: settles a parent that no longer waits (double release)", "include/flows.lua",
           "if row[1] ~= 'waiting' then return verdict or 0 end -- fence: released, failed",
           "", "the waiting check removed",
           probes=("flow_same_slot_child_of_a_cancelled_flow_changes_nothing",)),
    Mutant("flows: a same-slot child also leaves a notice (settled twice)", "include/flows.lua",
           "if pq ~= q then",
           "redis.call('HSET', finished, id, outcome .. ':' .. parent) if pq ~= q then",
           "both paths at once: the relay delivers what the script settled"),
    Mutant("flows: a parent in another queue settled in the child's slot", "include/flows.lua",
           "if pq ~= q then", "if false then",
           "the notice is never written: a cross-slot parent is never released"),
    Mutant("flow_parent: cancels a parent that no longer waits", "flow_parent.lua",
           "if row[1] ~= 'waiting' then return 0 end -- fence: released, failed or cancelled",
           "", "a released or failed parent cancelled",
           probes=("flow_same_slot_release_waits_for_the_last_child",)),
    Mutant("flow_parent: tombstones an admitted parent", "flow_parent.lua",
           "if not row[1] then -- fence: never admitted", "if true then",
           "the repair undoes a committed flow"),
    Mutant("flow_start: starts a child that is not held", "flow_start.lua",
           "if row[1] ~= 'held' then return 0 end", "",
           "a finished child runs again", probes=("flow_start_leaves_a_finished_child",)),
    Mutant("flow_child: drops a child that is not held", "flow_child.lua",
           "if redis.call('HGET', KEYS[1], 'state') ~= 'held' then return 0 end", "",
           "a cancelled flow deletes its children's rows"),
    Mutant("flow_child: acks a newer notice", "flow_child.lua",
           "if redis.call('HGET', KEYS[4], ARGV[2]) ~= ARGV[3] then return 0 end", "",
           "a notice deleted without being the one delivered",
           probes=("flow_ack_keeps_a_newer_notice",)),
    Mutant("flow_hold: overwrites an existing job", "flow_hold.lua",
           "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end", "",
           "the duplicate check removed"),
    Mutant("flow_admit: expects one child fewer (release without the last child)", "flow_admit.lua",
           "'children', #ARGV - 11,", "'children', #ARGV - 12,", "child count off by one"),
    Mutant("flows: a failed parent never tells its own parent", "include/flows.lua",
           "if not row[4] then return verdict or 3 end", "do return verdict or 3 end",
           "a nested flow's root waits for ever once an inner parent failed (the flow "
           "machine's nested_failure_in_one_queue step reaches it every run)"),
    Mutant("flows: a child's notice is never written", "include/flows.lua",
           "redis.call('HSET', finished, id, outcome .. ':' .. parent)", "",
           "the parent is never released"),
    Mutant("complete: a cancelled flow child noticed as done", "complete.lua",
           "if row[5] then flow_told(KEYS[6], ARGV[1], row[5], row[4] and 'cancelled' or 'done') end",
           "if row[5] then flow_told(KEYS[6], ARGV[1], row[5], 'done') end", "outcome wrong"),
    # priorities on one virtual time for every kind of job (issue 29 item 2): a plain job
    # scored 0 overtook a level-p job once the lanes' virtual time passed p * AGE (the
    # model's history and plain_versus_laned steps; tests/echomq/test_priority_history.py)
    Mutant("pend: a plain job scores 0", "include/pend.lua",
           "score = tonumber(redis.call('HGET', meta, 'vtime') or '0')",
           "score = lane and tonumber(redis.call('HGET', meta, 'vtime') or '0') or 0",
           "a requeued, retried or promoted plain job back at 0"),
    Mutant("enqueue: a plain job scores 0", "enqueue.lua",
           "meta[2] or '0'", "0", "the old rule on admission"),
    Mutant("enqueue_batch: plain jobs score 0", "enqueue_batch.lua",
           "local tag = redis.call('HGET', KEYS[3], 'vtime') or '0'", "local tag = '0'",
           "the old rule on batch admission", probes=("batch_plain_job_is_tagged_on_vtime",)),
    # dedupe windows (issue 28 item 2): not steps of the model machine; each is killed by
    # the deterministic API test named (one pytest run, on one server, stands for all runs)
    Mutant("throttle: ignores the window", "throttle.lua",
           "if holder or redis.call('EXISTS', KEYS[1]) == 1 then",
           "if redis.call('EXISTS', KEYS[1]) == 1 then",
           "a held key admits a second job",
           _DEDUPE + "::test_throttle_refuses_the_key_for_its_window_then_admits"),
    Mutant("dedupe: no bound on the window", "include/dedupe.lua",
           "if not ms or ms < 1 or ms > DEDUPE_MAX_MS or ms ~= math.floor(ms) then", "if not ms then",
           "a negative or huge window accepted by the script",
           "tests/echomq/test_dedupe_windows.py::test_the_scripts_refuse_bad_windows_themselves"),
    Mutant("debounce: ignores the window (never replaces)", "debounce.lua",
           "if row[1] == 'pending' or row[1] == 'delayed' then", "if false then",
           "a second job instead of the waiting holder's new payload",
           _DEDUPE + "::test_debounce_replaces_the_waiting_holder_and_moves_its_due_time"),
    Mutant("debounce: replaces a running holder", "debounce.lua",
           "if row[1] == 'pending' or row[1] == 'delayed' then", "if row[1] then",
           "the running job's payload changed under it",
           _DEDUPE + "::test_debounce_leaves_a_running_holder_alone_and_the_new_job_waits_for_it"),
    Mutant("debounce: acts on a holder it did not see", "debounce.lua",
           "if holder and holder ~= guess then return {3, holder} end", "",
           "the peek-then-act fence removed",
           _DEDUPE + "::test_debounce_replaces_the_waiting_holder_and_moves_its_due_time"),
    # one id, one job across a sharded queue (decision 0040): the reservation in the id's
    # home shard; the model test runs one queue, so these meet their probes only
    Mutant("reserve: a takeover ignores what it read", "reserve.lua",
           "if ARGV[5] ~= '' and row[2] == ARGV[5] and row[3] == ARGV[6] then",
           "if ARGV[5] ~= '' then", "the owner/time fence of a takeover removed (two repairers "
           "both take over)", probes=("reserve_takeover_is_fenced",), model=False),
    Mutant("reserve: a resend is refused by its own reservation", "reserve.lua",
           "if row[2] == ARGV[2] then -- fence: this shard's own", "if false then",
           "the same-shard check removed (a resend after the first step answers DUPLICATE, "
           "no job admitted)", probes=("reserve_resend_completes",), model=False),
    Mutant("reserve: a crashed reservation is never repaired", "reserve.lua",
           "if now - tonumber(row[3]) >= window then", "if false then",
           "the repair window never ends (the id is refused for ever, no job)",
           probes=("reserve_stale_is_repaired",), model=False),
    Mutant("reserve: a young reservation is repaired away", "reserve.lua",
           "if now - tonumber(row[3]) >= window then", "if true then",
           "no repair window (a live admission's reservation taken over)",
           probes=("reserve_young_is_respected",), model=False),
]


EQUIVALENT: list[tuple[str, str, str]] = []
"""Marked check lines no mutant removes, each with the reason its removal cannot change
behaviour (an equivalent mutant): (file, exact text, reason)."""


class TargetError(Exception):
    pass


def check_targets(lua: Path, mutants: list[Mutant] = MUTANTS) -> None:
    """Every mutant's text is on exactly one line of its file, and every marked check line
    (``-- fence:``/``-- threshold:``) is some mutant's target. Raises TargetError."""
    problems = []
    targeted: dict[str, set[int]] = {}
    for m in mutants:
        path = lua / m.file
        if not path.exists():
            problems.append(f"{m.name}: {m.file} does not exist")
            continue
        hits = [i for i, line in enumerate(path.read_text().splitlines(), 1) if m.old in line]
        if len(hits) != 1:
            problems.append(f"{m.name}: {m.old!r} found on {len(hits)} lines of {m.file} (need 1)")
            continue
        targeted.setdefault(m.file, set()).add(hits[0])
    for file, text, _ in EQUIVALENT:
        lines = (lua / file).read_text().splitlines() if (lua / file).exists() else []
        hits = [i for i, line in enumerate(lines, 1) if text in line]
        if len(hits) != 1:
            problems.append(f"equivalent {text!r} found on {len(hits)} lines of {file} (need 1)")
        targeted.setdefault(file, set()).update(hits)
    for path in sorted(lua.rglob("*.lua")):
        name = path.relative_to(lua).as_posix()
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if any(mark in line for mark in MARKERS) and i not in targeted.get(name, set()):
                problems.append(f"{name}:{i} is a marked check no mutant removes: {line.strip()}")
    if problems:
        raise TargetError("mutation targets out of date:\n  " + "\n  ".join(problems))


PREAMBLE = """# Mutation check of the Lua scripts (the last full run)

Regenerate:
`.venv/bin/python scripts/mutation_check.py --runs 20 --need 19 --jobs 2 --report docs/mutation.md`
(about 10 minutes on this 2-core machine; exit 1 while a mutant survives); chosen rows
only: `--only NAME[,NAME...] --update`. A surviving mutant names a guarantee the model
test and the probes (tests/echomq/mutation_probes.py) do not yet hold the Lua to.

"""


def _row(lua: Path, m: Mutant, killed: str) -> str:
    return f"| {m.name} | `src/echomq/protocol/lua/{m.file}:{line_of(lua, m)}` | {m.why} | {killed} |"


def _parse(report: str) -> tuple[dict[str, str], str]:
    """The rows of an earlier report's table by mutant name, and its head (its "Mutation
    check at" and "Rows updated at" lines); sections after the table (``## ...``) are left."""
    rows, head = {}, []
    for line in report.splitlines():
        if line.startswith("## "):
            break  # an addendum after the table (runs of a few mutants on their own)
        if line.startswith("| ") and not line.startswith("| mutant |"):
            rows[line[2:].split(" | ", 1)[0]] = line
        elif line.startswith(("Mutation check at", "Rows updated at")):
            head.append(line)
    return rows, "".join(h + "\n\n" for h in head)


def _tail(report: str) -> str:
    """What follows an earlier report's table (notes, addenda): kept by an update."""
    lines = report.splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if line.startswith("|")]
    if not rows:
        return ""
    end = rows[0]
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "".join(lines[end:]).lstrip("\n")


def line_of(lua: Path, m: Mutant) -> int:
    return next(i for i, line in enumerate((lua / m.file).read_text().splitlines(), 1) if m.old in line)


def mutated_copy(m: Mutant | None, into: Path) -> Path:
    """A copy of the package under ``into`` with the mutant applied; returns the copy's root."""
    shutil.copytree(PACKAGE, into / "echomq", ignore=shutil.ignore_patterns("__pycache__"))
    if m is not None:
        path = into / "echomq" / "protocol" / "lua" / m.file
        lines = path.read_text().splitlines(keepends=True)
        i = line_of(into / "echomq" / "protocol" / "lua", m) - 1
        lines[i] = lines[i].replace(m.old, m.new, 1)
        path.write_text("".join(lines))
    return into


def child(copy: Path, url: str, runs: int, examples: int, steps: int, mutant: str) -> None:
    """In the child: prove the copy is what runs, then run the model test ``runs`` times."""
    import echomq
    from echomq.protocol.scripts import bundle

    assert Path(echomq.__file__).resolve().is_relative_to(copy.resolve()), echomq.__file__
    bundle()  # every script still parses
    sys.path.insert(0, str(ROOT))
    test = next((m.test for m in MUTANTS if m.name == mutant), "")
    if test:  # a deterministic test: one run stands for all
        import pytest

        rc = pytest.main([str(ROOT / test), "-x", "-q", "-p", "no:cacheprovider", "-m", "not cluster",
                          "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")])
        assert rc in (0, 1), f"pytest exit status {rc} for {test}"
        print(json.dumps({"mutant": mutant, "killed": runs if rc else 0, "runs": runs,
                          "why": [f"{test} failed"] if rc else []}))
        return
    from hypothesis import Phase
    from tests.echomq.mutation_probes import PROBES
    from tests.echomq.test_model import run_flow_machine, run_machine

    m = next((m for m in MUTANTS if m.name == mutant), None)
    probes = sorted(PROBES) if m is None else list(m.probes)  # the baseline: every probe
    killed, why = 0, []
    for run in range(runs):
        try:
            # a flow mutant meets the flow machine (tests/echomq/model_flows.py)
            # (the baseline meets both)
            machines = [run_flow_machine] if "flow" in mutant else [run_machine]
            if m is not None and not m.model:
                machines = []
            for machine in machines + ([run_flow_machine] if mutant == "baseline" else []):
                machine(url, False, examples=examples, steps=steps, phases=[Phase.generate],
                        database=None, print_blob=False)
            for n, probe in enumerate(probes):
                asyncio.run(_probe(PROBES[probe], url, f"probe-{os.getpid()}-{run}-{n}"))
        except Exception as exc:  # a failed run: the mutant was seen
            killed += 1
            why.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")
    print(json.dumps({"mutant": mutant, "killed": killed, "runs": runs, "why": why[:3]}))


async def _probe(probe: Any, url: str, name: str) -> None:
    from echomq import AsyncConnector

    conn = AsyncConnector.from_url(url)
    try:
        await probe(conn, name)
    finally:
        await conn.aclose()


def run_one(m: Mutant | None, url: str, args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="echomq-mutant-") as tmp:
        copy = mutated_copy(m, Path(tmp))
        env = dict(os.environ, PYTHONPATH=f"{copy}{os.pathsep}{ROOT}", PYTHONDONTWRITEBYTECODE="1")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(copy), "--url", url,
               "--runs", str(args.runs), "--examples", str(args.examples), "--steps", str(args.steps),
               "--mutant", m.name if m else "baseline"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"child for {m.name if m else 'baseline'} failed:\n{proc.stderr[-3000:]}")
        out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
        out["seconds"] = round(time.monotonic() - t0, 1)
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--need", type=int, default=19)
    ap.add_argument("--examples", type=int, default=12)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None,
                    help="run the mutants whose name contains this (comma-separated: any of these)")
    ap.add_argument("--report", type=Path, default=None)
    ap.add_argument("--update", action="store_true",
                    help="with --report: rewrite only the rows of the mutants run (the others "
                         "keep their last figures) and add a note under the table's head")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--mutant", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.url, args.runs, args.examples, args.steps, args.mutant)
        return 0

    lua = PACKAGE / "protocol" / "lua"
    check_targets(lua)
    names = [n.strip() for n in (args.only or "").split(",") if n.strip()]
    chosen = [m for m in MUTANTS if not names or any(n in m.name for n in names)]
    sys.path.insert(0, str(ROOT / "src"))
    from echomq.servers.server import EmbeddedValkey

    t0 = time.monotonic()
    with EmbeddedValkey(appendonly=False) as server:
        base = run_one(None, server.url, args)
        print(f"baseline: {base['killed']}/{base['runs']} runs failed ({base['seconds']} s)", flush=True)
        if base["killed"]:
            print(f"the unmutated package fails the model test: {base['why']}")
            return 1
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(run_one, m, server.url, args): m for m in chosen}
            results = {}
            for fut in concurrent.futures.as_completed(futures):
                m, r = futures[fut], fut.result()
                results[m.name] = r
                print(f"{m.name}: killed {r['killed']}/{r['runs']} ({r['seconds']} s)", flush=True)
    survivors, fresh = [], {}
    for m in chosen:
        r = results[m.name]
        k = int(r["killed"])  # type: ignore[call-overload]
        if k < args.need:
            survivors.append(m.name)
        fresh[m.name] = _row(lua, m, f"{k}/{r['runs']}{'' if k >= args.need else ' **SURVIVES**'}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    what = (f"{args.runs} runs each of the model test ({args.examples} examples x {args.steps} "
            f"steps, generation only, single server) and of the mutant's probes; baseline "
            f"0/{args.runs} failed; killed in at least {args.need}/{args.runs} required; "
            f"{time.monotonic() - t0:.0f} s")
    old_rows, head = {}, f"Mutation check at `{commit}`: {len(chosen)} mutants, {what}.\n\n"
    tail = ""
    if args.update and args.report and args.report.exists():
        old_rows, old_head = _parse(args.report.read_text())
        tail = _tail(args.report.read_text())
        head = old_head + (f"Rows updated at `{commit}` ({len(chosen)} mutants: "
                           f"{', '.join(m.name for m in chosen)}): {what}.\n\n")
    rows = ["| mutant | file:line | change | killed |", "|---|---|---|---|"]
    for m in MUTANTS if args.update else chosen:
        rows.append(fresh.get(m.name) or old_rows.get(m.name) or _row(lua, m, "not run"))
    table = head + "\n".join(rows) + "\n" + (f"\n{tail}" if tail else "")
    if EQUIVALENT:
        table += ("\nMarked checks with no mutant (equivalent: removing them cannot change "
                  "behaviour):\n\n" + "\n".join(f"- `{f}`: `{t}`: {why}" for f, t, why in EQUIVALENT)
                  + "\n")
    print(table)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(PREAMBLE + table)
    if survivors:
        print(f"surviving mutants: {survivors}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
