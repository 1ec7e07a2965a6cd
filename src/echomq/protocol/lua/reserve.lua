#!lua
-- name: reserve
-- summary: Reserve a job id of a sharded queue in this shard for the shard its job goes to
--   (docs/decisions/0040): one id is one job across the logical queue whatever lane it
--   carries. Run on the id's home shard (crc16(id) % N, where a lane-less admission goes)
--   before a laned admission elsewhere; the reservation is a row in state 'reserved'
--   (shard = the target, at = server ms) in no state set, so it is never claimed, counted
--   or browsed, and an admit or enqueue of the id here answers DUPLICATE. Run with a ttl on
--   the shard a crashed reservation named, it voids that shard for the id (a late admission
--   there answers DUPLICATE). With the owner and time read before (a takeover), replaces a
--   reservation that is still as read, and only then. Every reservation kept (not a void)
--   is listed in `reserved` (score: when the sweep last saw it, server ms), for the sweep.
-- KEYS[1] job: emq:{q}:job:<id>, hash, the job's row or its reservation
-- KEYS[2] meta: emq:{q}:meta, hash, the protocol version
-- KEYS[3] reserved: emq:{q}:reserved, sorted set, the ids reserved here, score = server ms
-- ARGV[1] id: the branded job id
-- ARGV[2] shard: the sub-queue the id's job goes to; '' for this shard itself (nothing is
--   reserved; a takeover deletes the reservation)
-- ARGV[3] window_ms: another shard's reservation at least this old is reported stale
-- ARGV[4] ttl_ms: 0 keeps a new reservation, else it expires after this many ms (a void)
-- ARGV[5] owner: '' or, for a takeover, the shard of the reservation read before
-- ARGV[6] at: '' or, for a takeover, the time of the reservation read before
-- RETURNS: array {verdict, shard, at}: 'reserved' (new, taken over, or already for this
--   shard: a resend) | 'free' (no row and shard '', or a reservation deleted by a takeover)
--   | 'job' (a job's row is here; shard is its state) | 'held' (another shard's
--   reservation) | 'stale' (another shard's reservation at least window_ms old); a
--   reservation for this shard (a resend, or the sweep's) moves to the back of `reserved`
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed argument; EMQKEYS keys
--   not this id's queue; EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'meta', 'reserved'}, 6)
if bad then return bad end
local window, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
if not window or window < 0 or not ttl or ttl < 0 or #ARGV[2] > 200 then
  return redis.error_reply('EMQARG window_ms and ttl_ms must be numbers >= 0, shard a name')
end
local refused, known = fence(KEYS[2])
if refused then return refused end
local row = redis.call('HMGET', KEYS[1], 'state', 'shard', 'at')
local now = now_ms()
if not row[1] then
  if ARGV[2] == '' then
    redis.call('ZREM', KEYS[3], ARGV[1]) -- a listed id whose row went
    return {'free', '', ''}
  end
  if not known then redis.call('HSET', KEYS[2], 'protocol', PROTOCOL) end
  redis.call('HSET', KEYS[1], 'state', 'reserved', 'shard', ARGV[2], 'at', fmt(now))
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('ZADD', KEYS[3], fmt(now), ARGV[1]) end
  return {'reserved', ARGV[2], fmt(now)}
end
if row[1] ~= 'reserved' then return {'job', row[1], ''} end
if ARGV[5] ~= '' and row[2] == ARGV[5] and row[3] == ARGV[6] then -- fence: the takeover
  if ARGV[2] == '' then
    redis.call('HDEL', KEYS[1], 'state', 'shard', 'at') -- its only fields: the row is gone
    redis.call('ZREM', KEYS[3], ARGV[1])
    return {'free', '', ''}
  end
  redis.call('HSET', KEYS[1], 'shard', ARGV[2], 'at', fmt(now))
  redis.call('ZADD', KEYS[3], fmt(now), ARGV[1])
  return {'reserved', ARGV[2], fmt(now)}
end
if row[2] == ARGV[2] then -- fence: this shard's own
  redis.call('ZADD', KEYS[3], 'XX', fmt(now), ARGV[1])
  return {'reserved', row[2], row[3]}
end
if now - tonumber(row[3]) >= window then return {'stale', row[2], row[3]} end -- threshold: the repair window
return {'held', row[2], row[3]}
