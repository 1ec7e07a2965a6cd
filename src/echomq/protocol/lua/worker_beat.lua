#!lua flags=allow-oom
-- name: worker_beat
-- summary: Register or refresh one worker of the queue until ttl_ms from the server's now
--   (ttl_ms 0 removes it), and forget up to 16 workers whose registration has expired.
-- KEYS[1] workers: emq:{q}:workers, sorted set, worker name -> registration deadline (server ms)
-- KEYS[2] about: emq:{q}:workers:about, hash, worker name -> its description (JSON)
-- KEYS[3] meta: emq:{q}:meta, the protocol version (a worker never joins a queue of another)
-- ARGV[1] name: the worker's name
-- ARGV[2] ttl_ms: how long the registration lives without another beat, 0 to remove it
-- ARGV[3] about: the worker's description
-- RETURNS: the registration deadline (server ms) | 0 removed
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not one queue's; EMQVERSION another
--   major version; nothing written
-- @include now
-- @include fence
-- @include shape
local bad = shape({'workers', 'workers:about', 'meta'}, 3)
if bad then return bad end
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 0 or ARGV[1] == '' then
  return redis.error_reply('EMQARG ttl_ms must be >= 0 and the name non-empty')
end
local refused = fence(KEYS[3])
if refused then return refused end
local now = now_ms()
local gone = redis.call('ZRANGE', KEYS[1], '-inf', '(' .. fmt(now), 'BYSCORE', 'LIMIT', 0, 16)
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[2], unpack(gone))
end
if ttl == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return fmt(now + ttl)
