#!lua flags=no-writes
-- name: pending_size
-- summary: The number of jobs ready to be claimed.
-- KEYS[1] pending: emq:{q}:pending
-- RETURNS: the size of the pending set
-- ERRORS: none
return redis.call('ZCARD', KEYS[1])
