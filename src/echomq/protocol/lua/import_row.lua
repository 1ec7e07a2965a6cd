#!lua
-- name: import_row
-- summary: Write one job's row, moved from a shard of the retired layout by an online
--   reshard, into this shard of the new layout, and put it in the set of its state
--   (docs/decisions/0032-online-reshard.md). A pending job is placed as an admission
--   places it (its lane's next start tag; score 0 while it holds its serial lane), a
--   delayed, done, dead or expired one at its old score (server ms); a waiting one with a
--   deadline (its row's 'exp') goes on the expiring index too. Does nothing when the row is
--   here already (imported before: a mover that crashed after this step runs it again).
-- KEYS[1] job: emq:{q}:job:<id>, hash, the job's row
-- KEYS[2] pending: emq:{q}:pending
-- KEYS[3] lanes: emq:{q}:lanes, hash, lane -> start tag of its last waiting job
-- KEYS[4] meta: emq:{q}:meta, hash, protocol version and vtime
-- KEYS[5] wake: emq:{q}:wake, shard channel
-- KEYS[6] inflight: emq:{q}:inflight, hash, serial lane -> the job holding it
-- KEYS[7] set: emq:{q}:delayed, done, dead or expired, the set of a job in that state
--   (pending: its pending key again)
-- KEYS[8] expiring: emq:{q}:expiring, the deadlines of waiting jobs
-- ARGV[1] id: the branded job id
-- ARGV[2] state: pending, delayed, done, dead or expired (the set it was in)
-- ARGV[3] score: its score in that set (server ms; ignored for pending)
-- ARGV[4] held: '1' when the job holds its serial lane, else '0'
-- ARGV[5..] fields: the row as field, value pairs (state among them)
-- RETURNS: 1 imported | 0 the row was here already (nothing written)
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not this id's queue; EMQVERSION
--   another major version; nothing written
-- @include now
-- @include age
-- @include pend
-- @include fence
-- @include shape
local sets = {pending = 'pending', delayed = 'delayed', done = 'done', dead = 'dead',
              expired = 'expired'}
local set = sets[ARGV[2] or '']
if not set then
  return redis.error_reply('EMQARG state must be pending, delayed, done, dead or expired')
end
local bad = shape({'job:' .. (ARGV[1] or ''), 'pending', 'lanes', 'meta', 'wake', 'inflight', set,
                   'expiring'}, 4, 8)
if bad then return bad end
if #KEYS ~= 8 or (#ARGV - 4) % 2 ~= 0 or #ARGV < 6 then
  return redis.error_reply('EMQARG the row must be field, value pairs')
end
local score = tonumber(ARGV[3])
if not score or (ARGV[4] ~= '0' and ARGV[4] ~= '1') then
  return redis.error_reply('EMQARG score must be a number and held 0 or 1')
end
local refused, known = fence(KEYS[4])
if refused then return refused end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if not known then redis.call('HSET', KEYS[4], 'protocol', PROTOCOL) end
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
local lane, exp, prio, timeout, parent, asked = unpack(redis.call('HMGET', KEYS[1], 'lane', 'exp', 'prio',
                                                                  'timeout', 'parent', 'cancel'))
if lane or prio or timeout then redis.call('HDEL', KEYS[4], 'plain') end -- fence: the claim reads them
if parent or asked then redis.call('HDEL', KEYS[4], 'bare') end -- fence: the finish reads them
if exp and (set == 'pending' or set == 'delayed') then redis.call('ZADD', KEYS[8], exp, ARGV[1]) end
if ARGV[4] == '1' and lane then redis.call('HSET', KEYS[6], lane, ARGV[1]) end
if set == 'pending' then
  pend(KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], lane, ARGV[4] == '1', KEYS[1])
else
  redis.call('ZADD', KEYS[7], score, ARGV[1])
end
return 1
