"""The order the parallel run hands tests out in: the longest first, one share per worker.

``scripts/test.sh`` runs pytest-xdist with ``--dist worksteal``: the collection is cut into
one contiguous share per worker, each worker runs its share in order, and a worker that
runs out takes the second half of the longest queue left. A long test far down a share
then runs last, alone, with the other workers idle (the full run once spent 15 minutes on
the model test with 37 tests queued behind it). So the known long tests (their wall times
from a profile: ``ECHOMQ_TEST_CPU=DIR``, then ``python scripts/suite_cpu.py DIR``) are dealt,
longest first, to the share with the least work, and each share starts with its long
tests; every other test keeps its place (a module's tests stay together, so module-wide
fixtures start once per worker; a long test using one keeps its place too). A test
missing from the list only loses its head start. An entry is a test function's name, or a
name with its parameters where the variants differ (the model test's single-server run
takes a third of its cluster run's time).
"""

from __future__ import annotations

import os

import pytest

# test function -> seconds of wall time on a loaded machine (the full run of 2026-12-03 at
# 22:35, load average about 9; tests/cpu_use.py has their CPU, scripts/suite_cpu.py ranks them)
LONG: dict[str, float] = {
    "test_sharded_queue_matches_its_model_on_the_cluster": 215,
    "test_protocol_matches_its_model": 210,  # [cluster]; a parametrised name first:
    "test_protocol_matches_its_model[single]": 76,
    "test_a_season_through_the_front_door_survives_kills_and_restarts": 170,
    "test_wheel_installed_in_a_fresh_venv_runs_a_job": 165,
    "test_the_front_door_on_a_cluster_survives_a_kill": 147,
    "test_the_readme_runs_the_bot_with_polling_then_with_a_webhook": 106,
    "test_chaos_60s_loses_nothing_and_keeps_the_books": 87,
    "test_the_schedule_command": 80,
    "test_flows_match_their_model": 72,
    "test_flows_match_their_model[single]": 23,
    "test_money_holds_and_every_round_settles_under_postgresql_faults": 58,
    "test_settlements_and_charges_concurrently_never_deadlock": 51,
    "test_play_rides_out_postgres_faults_at_every_round_close": 48,
    "test_ctrl_c_during_codemojex_play_20_times": 47,
    "test_every_parent_released_exactly_once_under_kill_9": 39,
    "test_kill_9_at_a_milestone_then_the_same_command_finishes": 39,
    "test_a_notifier_killed_before_the_request_leaves_loses_nothing": 39,
    "test_rounds_settle_through_restarts_and_terminated_backends": 37,
    "test_play_as_the_readme_runs_it": 37,
    "test_partitions_of_the_queue_primary": 37,
    "test_kill_9_mid_round_then_resume_settles_every_round": 36,
    "test_a_flooding_lane_cannot_starve_the_others": 35,
    "test_the_game_on_the_cluster_rides_out_a_primary_killed_under_it": 34,
    "test_a_killed_chaos_run_leaves_no_process_behind": 33,
    "test_a_primary_killed_while_children_complete_on_it": 31,
    "test_a_notifier_killed_mid_send_sends_it_again": 31,
    "test_a_notifier_killed_after_the_send_does_not_send_again": 30,
    "test_kill_9_mid_round_on_the_cluster_then_resume_settles_every_round": 30,
    "test_postgres_outage_kills_jobs_and_every_round_still_settles": 29,
    "test_the_game_on_a_cluster_loses_nothing_when_a_primary_is_killed": 28,
    "test_100k_expired_leases_are_reaped_in_bounded_calls": 27,
    "test_primary_kill_9_failover_and_restart_under_load": 27,
}


def _weight(item: pytest.Item) -> float:
    """The test's place in LONG; 0 (it keeps its place) when it uses a module-wide fixture:
    taken out of its module, it would set that fixture up a second time in its worker
    (test_search_surfaces' queue, named by the worker's pid, then got its jobs twice)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and any(d.scope != "function" and d.scope != "session"
                                for defs in info.name2fixturedefs.values() for d in defs):
        return 0.0
    return LONG.get(item.name) or LONG.get(getattr(item, "originalname", item.name), 0.0)


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 2 or len(items) < 2 * workers:
        return
    long = sorted((i for i in items if _weight(i)), key=_weight, reverse=True)
    rest = [i for i in items if not _weight(i)]
    # worksteal's first cut: share k gets len(pending) // (workers - k) of what is left
    sizes, left = [], len(items)
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for item in long:
        open_ = [k for k in range(workers) if len(shares[k]) < sizes[k]]
        k = min(open_, key=lambda k: load[k])
        shares[k].append(item)
        load[k] += _weight(item)
    it = iter(rest)
    for k in range(workers):
        shares[k] += [next(it) for _ in range(sizes[k] - len(shares[k]))]
    items[:] = [i for share in shares for i in share]
