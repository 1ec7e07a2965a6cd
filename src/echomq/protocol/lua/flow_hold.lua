#!lua
-- name: flow_hold
-- summary: Admit one child of a flow *held*: its row (state 'held', the payload, its parent)
--   and its place in the held set land together, and it is not claimable (docs/decisions/
--   0038-flows.md). It becomes pending only when its parent is admitted (flow_start),
--   or is dropped by the repair when its parent never was. Refuses a non-JOB id before any
--   write and a duplicate id without writing.
-- KEYS[1] job: emq:{q}:job:<id>
-- KEYS[2] held: emq:{q}:held, sorted set, score = admission time (server ms)
-- KEYS[3] meta: emq:{q}:meta
-- ARGV[1] id: the branded job id
-- ARGV[2] payload: the job's bytes
-- ARGV[3] parent: '<parent id>:<parent queue>'
-- ARGV[4] expires_ms: '' for none, else the child must start within this many ms of its hold
--   (1..31622400000); kept in the row as 'exp' (server ms), indexed when it starts
--   (flow_start; docs/decisions/0045-expiry.md)
-- RETURNS: 1 held | 0 duplicate (the existing row untouched)
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed parent or deadline; EMQKEYS keys not
--   this id's queue; EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
-- @include deadline
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'held', 'meta'}, 4)
if bad then return bad end
if not string.match(ARGV[3], '^JOB%w+:.') then
  return redis.error_reply('EMQARG parent must be <parent id>:<parent queue>')
end
local derr, expires = deadline_arg(ARGV[4], 0)
if derr then return derr end
local refused, known = fence(KEYS[3])
if refused then return refused end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if not known then redis.call('HSET', KEYS[3], 'protocol', PROTOCOL) end
redis.call('HSET', KEYS[1], 'state', 'held', 'attempts', '0', 'payload', ARGV[2], 'parent', ARGV[3])
redis.call('ZADD', KEYS[2], now_ms(), ARGV[1])
if expires then redis.call('HSET', KEYS[1], 'exp', fmt(now_ms() + expires)) end
return 1
