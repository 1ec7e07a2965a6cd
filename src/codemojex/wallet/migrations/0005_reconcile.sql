-- 0005: the reconciler's memory of the dead jobs it requeued (issue 25, item 3).
--
-- One row per (queue, job) the reconciler requeued: how many times, and once it stops
-- (after its bound) when and why it gave up. Kept here, not in a process, so a restart
-- neither requeues a hopeless job again nor forgets what it gave up on.
CREATE TABLE reconcile_jobs (
    queue       text NOT NULL,
    job_id      text NOT NULL,
    requeues    integer NOT NULL DEFAULT 0,
    gave_up_at  timestamptz,
    cause       text NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, job_id),
    CONSTRAINT reconcile_jobs_requeues CHECK (requeues >= 0)
);
CREATE INDEX reconcile_jobs_gave_up ON reconcile_jobs (queue) WHERE gave_up_at IS NOT NULL;
