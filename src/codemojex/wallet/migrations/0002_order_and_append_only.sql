-- 0002: the server-side order of guesses, and an append-only ledger.

-- Ties between equal guesses go to the earliest one, and "earliest" is the
-- order in which PostgreSQL recorded the charges: a sequence drawn inside the
-- charge's transaction, never an id's bits (a Telegram guess id is derived with
-- timestamp 0, so its bits are a hash). Existing guesses are numbered by
-- (created_at, id), the best order known for them.
CREATE SEQUENCE guesses_seq AS bigint;
ALTER TABLE guesses ADD COLUMN seq bigint;
UPDATE guesses g SET seq = o.n
    FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM guesses) o
    WHERE g.id = o.id;
SELECT setval('guesses_seq', coalesce((SELECT max(seq) FROM guesses), 0) + 1, false);
ALTER TABLE guesses ALTER COLUMN seq SET DEFAULT nextval('guesses_seq'),
                    ALTER COLUMN seq SET NOT NULL,
                    ADD CONSTRAINT guesses_seq_unique UNIQUE (seq);
ALTER SEQUENCE guesses_seq OWNED BY guesses.seq;

-- Money history is append-only: a ledger line or a movement, once written, is
-- never changed or removed (corrections are new movements). Enforced by the
-- server for every role that does not own the tables, and for the owner too
-- unless it drops these triggers on purpose.
CREATE FUNCTION append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER movements_append_only BEFORE UPDATE OR DELETE ON movements
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER movements_no_truncate BEFORE TRUNCATE ON movements
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE INDEX guesses_unadmitted_seq ON guesses (seq) WHERE admitted_at IS NULL;
