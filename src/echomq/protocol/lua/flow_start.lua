#!lua flags=allow-oom
-- name: flow_start
-- summary: A held child of a flow becomes runnable: its parent is admitted (the producer's
--   last admission step, or the repair's; docs/decisions/0038-flows.md). It goes on pending
--   by the priority rule (include/pend.lua: its lane and priority, decision 0041), or on
--   delayed when it has a delay (due its 'delay' ms from now). A child in any other state
--   is left as it is, so a repeated start changes nothing.
-- KEYS[1] job: emq:{q}:job:<id>
-- KEYS[2] held: emq:{q}:held
-- KEYS[3] pending: emq:{q}:pending
-- KEYS[4] wake: emq:{q}:wake, told the id when pending stops being empty
-- KEYS[5] meta: emq:{q}:meta
-- KEYS[6] expiring: emq:{q}:expiring, where a child with a deadline ('exp') is indexed
-- KEYS[7] lanes: emq:{q}:lanes, the lanes' last start tags (include/pend.lua)
-- KEYS[8] delayed: emq:{q}:delayed, where a child with a delay waits (score = due, server ms)
-- ARGV[1] id: the child's id
-- RETURNS: 1 started | 0 not held (nothing changed)
-- ERRORS: EMQKEYS keys not this id's queue; EMQVERSION another major version; nothing written
-- @include now
-- @include age
-- @include pend
-- @include fence
-- @include shape
local bad = shape({'job:' .. (ARGV[1] or ''), 'held', 'pending', 'wake', 'meta', 'expiring',
                   'lanes', 'delayed'}, 1)
if bad then return bad end
local refused = fence(KEYS[5])
if refused then return refused end
local row = redis.call('HMGET', KEYS[1], 'state', 'exp', 'delay', 'lane')
if row[1] ~= 'held' then return 0 end -- fence: only a held child
redis.call('ZREM', KEYS[2], ARGV[1])
if row[2] then redis.call('ZADD', KEYS[6], row[2], ARGV[1]) end -- its deadline (decision 0045)
if row[3] then -- its delay, from now (decision 0041)
  redis.call('HSET', KEYS[1], 'state', 'delayed')
  redis.call('ZADD', KEYS[8], now_ms() + tonumber(row[3]), ARGV[1])
  return 1
end
redis.call('HSET', KEYS[1], 'state', 'pending')
pend(KEYS[3], KEYS[7], KEYS[5], KEYS[4], ARGV[1], row[4] or '', false, KEYS[1])
return 1
