-- 0006: each round keeps a hash of its secret (issue 25, item 5).
--
-- The scorer reads a round's secret from the cache tier (Valkey) and checks it against
-- this hash, read from PostgreSQL, before it scores with it: a cache entry changed by
-- anyone is refused and the secret is read here instead. The server computes the hash
-- itself on every insert or change of the secret, so no writer can store a wrong one:
-- sha256 over the six emojis joined by U+001F, UTF-8, in hex
-- (codemojex.domain.secret_hash computes the same).
ALTER TABLE rounds ADD COLUMN secret_hash text;
CREATE FUNCTION rounds_secret_hash() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.secret_hash := encode(sha256(convert_to(array_to_string(NEW.secret, chr(31)), 'UTF8')), 'hex');
    RETURN NEW;
END $$;
CREATE TRIGGER rounds_secret_hash BEFORE INSERT OR UPDATE ON rounds
    FOR EACH ROW EXECUTE FUNCTION rounds_secret_hash();
UPDATE rounds SET secret_hash = encode(sha256(convert_to(array_to_string(secret, chr(31)), 'UTF8')), 'hex');
ALTER TABLE rounds ALTER COLUMN secret_hash SET NOT NULL;
