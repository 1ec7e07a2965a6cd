#!lua flags=allow-oom
-- name: worker_beat
-- summary: Register or refresh one worker of the queue until ttl_ms from the server's now
--   (ttl_ms 0 removes it), and forget up to 16 workers whose registration has expired.
-- KEYS[1] workers: emq:{q}:workers, sorted set, worker name -> registration deadline (server ms)
-- KEYS[2] about: emq:{q}:workers:about, hash, worker name -> its description (JSON)
-- KEYS[3] meta: emq:{q}:meta, the protocol version (a worker never joins a queue of another)
-- ARGV[1] name: the worker's name, 1..256 bytes
-- ARGV[2] ttl_ms: how long the registration lives without another beat, 0..86400000; 0
--   removes it
-- ARGV[3] about: the worker's description, at most 8192 bytes; past maxmemory a new
--   registration over 1024 bytes (name and description) is refused (OOM)
-- RETURNS: the registration deadline (server ms) | 0 removed
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not one queue's; EMQVERSION another
--   major version; OOM a new registration past maxmemory; nothing written
-- @include now
-- @include bytes
-- @include fence
-- @include shape
local bad = shape({'workers', 'workers:about', 'meta'}, 3)
if bad then return bad end
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 0 or ttl > MAX_TTL_MS or ttl ~= math.floor(ttl) or ARGV[1] == '' then
  return redis.error_reply('EMQARG ttl_ms must be an integer in 0..86400000 and the name non-empty')
end
local big = too_long('name', #ARGV[1], MAX_NAME) or too_long('about', #ARGV[3], MAX_ABOUT)
  or (ttl > 0 and not redis.call('ZSCORE', KEYS[1], ARGV[1]) and full(#ARGV[1] + #ARGV[3]))
if big then return big end
local refused = fence(KEYS[3])
-- A worker registers on a sharded queue's logical name, whose meta records 'echomq-sharded'
-- (echomq.protocol.sharding.SHARDED): that refusal is for queue clients, not registrations.
if refused and redis.call('HGET', KEYS[3], 'protocol') ~= 'echomq-sharded' then return refused end
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
