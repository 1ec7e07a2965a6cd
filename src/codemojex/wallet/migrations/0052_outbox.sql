-- 0052: the game's outbox (issue 28, item 1; echomq.outbox, decision 0034). A charged
-- guess's job is written here in the charge's own transaction, under the guess's id
-- (job_id), and echomq's relay moves committed rows onto cm: the job exists if and only
-- if the charge committed. The table is echomq.outbox's (OutboxTable('cm_outbox')).
CREATE TABLE IF NOT EXISTS "cm_outbox" (
    id bigserial PRIMARY KEY,
    queue text NOT NULL,
    payload bytea NOT NULL,
    options jsonb NOT NULL DEFAULT '{}'::jsonb,
    created timestamptz NOT NULL DEFAULT clock_timestamp(),
    error text,
    job_id text
);
CREATE INDEX IF NOT EXISTS cm_outbox_job_id ON "cm_outbox" (job_id);
CREATE OR REPLACE FUNCTION "cm_outbox_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cm_outbox', '');
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS "cm_outbox_notify" ON "cm_outbox";
CREATE TRIGGER "cm_outbox_notify" AFTER INSERT ON "cm_outbox"
    FOR EACH STATEMENT EXECUTE FUNCTION "cm_outbox_notify"();
-- Not money: the charge writes a row, the relay (as the game's role) claims, deletes the
-- rows the queue took and marks the ones it refused for good.
GRANT SELECT, INSERT, DELETE ON "cm_outbox" TO codemojex_game;
GRANT UPDATE (error) ON "cm_outbox" TO codemojex_game;
GRANT USAGE ON SEQUENCE cm_outbox_id_seq TO codemojex_game;
