-- 0004: when a guess's score notification was delivered (issue 25, item 4).
--
-- The notification worker stamps it once the note is out, so the run's audit counts
-- delivered notes here, in PostgreSQL, and not from the queue's done rows (which
-- expire an hour after they finish: a resume later than that audited falsely).
ALTER TABLE guesses ADD COLUMN notified_at timestamptz;
