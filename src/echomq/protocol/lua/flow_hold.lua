#!lua
-- name: flow_hold
-- summary: Admit one child of a flow *held*: its row (state 'held', the payload, its parent,
--   its options) and its place in the held set land together, and it is not claimable
--   (docs/decisions/0038-flows.md). It becomes pending (or delayed) only when its parent is
--   admitted (flow_start), or is dropped by the repair when its parent never was. Every
--   argument is checked (include/options.lua, as admit's) and a non-JOB id refused before
--   any write; a duplicate id is refused without writing.
-- KEYS[1] job: emq:{q}:job:<id>
-- KEYS[2] held: emq:{q}:held, sorted set, score = admission time (server ms)
-- KEYS[3] meta: emq:{q}:meta, hash; a row with a parent clears its 'bare' (decision 0050)
-- ARGV[1] id: the branded job id
-- ARGV[2] payload: the job's bytes
-- ARGV[3] lane: lane name, '' for none; at most 1024 bytes (256 characters)
-- ARGV[4] delay_ms: 0, else the step waits this many ms after its start (at most 366 days)
-- ARGV[5] serial: '1' to hold the lane to one job in flight, else '0'
-- ARGV[6] max_attempts: the job's failure limit (1..10000), '' for the consumer's default
-- ARGV[7] priority: 0..3, higher is claimed first
-- ARGV[8] timeout_ms: the job's handler timeout (1..31622400000), '' for the consumer's
-- ARGV[9] token: '' (admit's place; at most 32 bytes, not kept)
-- ARGV[10] expires_ms: '' for none, else the child must start within this many ms of its
--   hold (1..31622400000, more than delay_ms); kept in the row as 'exp' (server ms),
--   indexed when it starts (flow_start; docs/decisions/0045-expiry.md)
-- ARGV[11] parent: '<parent id>:<parent queue>'
-- RETURNS: 1 held | 0 duplicate (the existing row untouched)
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed option, parent or deadline;
--   EMQKEYS keys not this id's queue; EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
-- @include options
-- @include steps
-- @include deadline
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'held', 'meta'}, 11)
if bad then return bad end
if not string.match(ARGV[11], '^JOB%w+:.') then
  return redis.error_reply('EMQARG parent must be <parent id>:<parent queue>')
end
local err, delay = admit_args()
if err then return err end
local derr, expires = deadline_arg(ARGV[10], delay)
if derr then return derr end
local refused, known = fence(KEYS[3])
if refused then return refused end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if not known then redis.call('HSET', KEYS[3], 'protocol', PROTOCOL) end
redis.call('HSET', KEYS[1], 'state', 'held', 'attempts', '0', 'payload', ARGV[2], 'parent', ARGV[11])
redis.call('HDEL', KEYS[3], 'bare') -- fence: the finish reads this job's parent (decision 0050)
step_row(KEYS[1], delay, KEYS[3])
redis.call('ZADD', KEYS[2], now_ms(), ARGV[1])
if expires then redis.call('HSET', KEYS[1], 'exp', fmt(now_ms() + expires)) end
return 1
