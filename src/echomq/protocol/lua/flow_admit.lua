#!lua
-- name: flow_admit
-- summary: Admit the parent of a flow *waiting* (not claimable), after its children are
--   held: this row is the flow's commit marker (docs/decisions/0038-flows.md). The row holds
--   the child count ('children'), the count settled so far ('settled'), the failure policy
--   ('policy': fail, continue or ignore), optionally its own parent, and one field per child
--   'c:<child id>:<child queue>' (its outcome once settled, '' before), and its options as a
--   step (decision 0041; checked as admit's, include/options.lua): applied at its release
--   (include/flows.lua). The parent enters the waiting set. A duplicate id (also the
--   repair's tombstone) is refused without writing.
-- KEYS[1] job: emq:{q}:job:<id>
-- KEYS[2] waiting: emq:{q}:waiting, sorted set, score = admission time (server ms)
-- KEYS[3] meta: emq:{q}:meta, hash; a row with a parent clears its 'bare' (decision 0050)
-- ARGV[1] id: the parent's branded id
-- ARGV[2] payload: the parent's bytes
-- ARGV[3] lane: lane name, '' for none; at most 1024 bytes (256 characters)
-- ARGV[4] delay_ms: 0, else the step waits this many ms after its release (at most 366 days)
-- ARGV[5] serial: '1' to hold the lane to one job in flight, else '0'
-- ARGV[6] max_attempts: the job's failure limit (1..10000), '' for the consumer's default
-- ARGV[7] priority: 0..3, higher is claimed first
-- ARGV[8] timeout_ms: the job's handler timeout (1..31622400000), '' for the consumer's
-- ARGV[9] token: '' (admit's place; at most 32 bytes, not kept)
-- ARGV[10] policy: on a child's failure: 'fail', 'continue' or 'ignore'
-- ARGV[11] parent: its own parent '<id>:<queue>' ('' for none)
-- ARGV[12..] children: '<child id>:<child queue>' for each child (at least one, no repeats)
-- RETURNS: 1 admitted waiting | 0 duplicate (the existing row untouched)
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed argument; EMQKEYS keys not
--   this id's queue; EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
-- @include options
-- @include steps
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'waiting', 'meta'}, 12, 3, nil)
if bad or #KEYS ~= 3 then return bad or redis.error_reply('EMQKEYS 3 keys expected') end
local policy = ARGV[10]
if policy ~= 'fail' and policy ~= 'continue' and policy ~= 'ignore' then
  return redis.error_reply('EMQARG policy must be fail, continue or ignore')
end
local fields, seen = {}, {}
local err, delay = admit_args()
if err then return err end
for i = 12, #ARGV do
  if not string.match(ARGV[i], '^JOB%w+:.') or seen[ARGV[i]] then
    return redis.error_reply('EMQARG child ' .. i - 11 .. ' is malformed or repeated')
  end
  seen[ARGV[i]] = true
  fields[#fields + 1], fields[#fields + 2] = 'c:' .. ARGV[i], ''
end
local refused, known = fence(KEYS[3])
if refused then return refused end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if not known then redis.call('HSET', KEYS[3], 'protocol', PROTOCOL) end
redis.call('HSET', KEYS[1], 'state', 'waiting', 'attempts', '0', 'payload', ARGV[2],
           'children', #ARGV - 11, 'settled', '0', 'policy', policy)
if ARGV[11] ~= '' then redis.call('HSET', KEYS[1], 'parent', ARGV[11]) end
if ARGV[11] ~= '' then redis.call('HDEL', KEYS[3], 'bare') end -- fence: the finish reads its parent
step_row(KEYS[1], delay, KEYS[3])
for s = 1, #fields, 256 do
  redis.call('HSET', KEYS[1], unpack(fields, s, math.min(s + 255, #fields)))
end
redis.call('ZADD', KEYS[2], now_ms(), ARGV[1])
return 1
