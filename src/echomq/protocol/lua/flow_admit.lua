#!lua
-- name: flow_admit
-- summary: Admit the parent of a flow *waiting* (not claimable), after its children are
--   held: this row is the flow's commit marker (docs/decisions/0038-flows.md). The row holds
--   the child count ('children'), the count settled so far ('settled'), the failure policy
--   ('policy': fail, continue or ignore), optionally its own parent, and one field per child
--   'c:<child id>:<child queue>' (its outcome once settled, '' before). The parent enters the
--   waiting set. A duplicate id (also the repair's tombstone) is refused without writing.
-- KEYS[1] job: emq:{q}:job:<id>
-- KEYS[2] waiting: emq:{q}:waiting, sorted set, score = admission time (server ms)
-- KEYS[3] meta: emq:{q}:meta
-- ARGV[1] id: the parent's branded id
-- ARGV[2] payload: the parent's bytes
-- ARGV[3] policy: on a child's failure: 'fail', 'continue' or 'ignore'
-- ARGV[4] parent: its own parent '<id>:<queue>' ('' for none)
-- ARGV[5..] children: '<child id>:<child queue>' for each child (at least one, no repeats)
-- RETURNS: 1 admitted waiting | 0 duplicate (the existing row untouched)
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed argument; EMQKEYS keys not
--   this id's queue; EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'waiting', 'meta'}, 5, 3, nil)
if bad or #KEYS ~= 3 then return bad or redis.error_reply('EMQKEYS 3 keys expected') end
local policy = ARGV[3]
if policy ~= 'fail' and policy ~= 'continue' and policy ~= 'ignore' then
  return redis.error_reply('EMQARG policy must be fail, continue or ignore')
end
local fields, seen = {}, {}
for i = 5, #ARGV do
  if not string.match(ARGV[i], '^JOB%w+:.') or seen[ARGV[i]] then
    return redis.error_reply('EMQARG child ' .. i - 4 .. ' is malformed or repeated')
  end
  seen[ARGV[i]] = true
  fields[#fields + 1], fields[#fields + 2] = 'c:' .. ARGV[i], ''
end
local refused, known = fence(KEYS[3])
if refused then return refused end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if not known then redis.call('HSET', KEYS[3], 'protocol', PROTOCOL) end
redis.call('HSET', KEYS[1], 'state', 'waiting', 'attempts', '0', 'payload', ARGV[2],
           'children', #ARGV - 4, 'settled', '0', 'policy', policy)
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'parent', ARGV[4]) end
for s = 1, #fields, 256 do
  redis.call('HSET', KEYS[1], unpack(fields, s, math.min(s + 255, #fields)))
end
redis.call('ZADD', KEYS[2], now_ms(), ARGV[1])
return 1
