#!lua flags=allow-oom
-- name: flow_parent
-- summary: The parent's side of a flow (docs/decisions/0038-flows.md). mode 'settle': the
--   relay delivers a child's outcome (done, dead, cancelled or expired) and the parent is
--   settled by include/flows.lua, the code a same-slot child's own script runs: the child's
--   field in the row records it once (a repeated notice changes nothing), and when every
--   child is settled the parent is released, waiting -> pending (or delayed, for a step with
--   a delay, lane or priority: decision 0041), exactly once (the row counts 'released'). A
--   failed child under policy 'fail' fails the parent (-> dead). mode 'abandon' (the repair
--   of a held child): a parent that was never admitted gets a tombstone row ('cancelled',
--   kept in done), so a late admission is refused and the child can be dropped. mode 'cancel': a waiting parent ends
--   'cancelled'. A parent that ends (dead, cancelled) and has a parent of its own is noticed.
-- KEYS[1] job: emq:{q}:job:<id>, the parent's row
-- KEYS[2] waiting: emq:{q}:waiting
-- KEYS[3] pending: emq:{q}:pending
-- KEYS[4] wake: emq:{q}:wake
-- KEYS[5] dead: emq:{q}:dead
-- KEYS[6] done: emq:{q}:done
-- KEYS[7] meta: emq:{q}:meta
-- KEYS[8] finished: emq:{q}:finished (channel, and the hash of flow notices)
-- KEYS[9] delayed: emq:{q}:delayed, where a released step with options waits for promote
-- ARGV[1] mode: 'settle', 'abandon' or 'cancel'
-- ARGV[2] id: the parent's id
-- ARGV[3] child: '<child id>:<child queue>' (settle; '' otherwise)
-- ARGV[4] outcome: 'done', 'dead', 'cancelled' or 'expired' (settle; '' otherwise): every
--   outcome but 'done' is a failed child under the parent's policy
-- RETURNS: settle: 2 released | 1 counted | 3 the parent failed | 0 a repeat, or the parent
--   no longer waits, or not its child (nothing changed); abandon: 1 tombstoned | 2 cancelled
--   or tombstoned before | 0 the parent exists; cancel: 1 cancelled | 0 not waiting
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not this id's queue; EMQVERSION another
--   major version; nothing written
-- @include now
-- @include ended
-- @include flows
-- @include fence
-- @include shape
local bad = shape({'job:' .. (ARGV[2] or ''), 'waiting', 'pending', 'wake', 'dead', 'done', 'meta',
                   'finished', 'delayed'}, 4)
if bad then return bad end
local mode, id, outcome = ARGV[1], ARGV[2], ARGV[4]
if mode ~= 'settle' and mode ~= 'abandon' and mode ~= 'cancel' then
  return redis.error_reply('EMQARG mode must be settle, abandon or cancel')
end
if mode == 'settle' and outcome ~= 'done' and outcome ~= 'dead' and outcome ~= 'cancelled'
    and outcome ~= 'expired' then
  return redis.error_reply('EMQARG outcome must be done, dead, cancelled or expired')
end
local refused = fence(KEYS[7])
if refused then return refused end
local now = now_ms()
local row = redis.call('HMGET', KEYS[1], 'state', 'children', 'policy', 'parent')
if mode == 'abandon' then
  if not row[1] then -- fence: never admitted: a tombstone refuses a late admission
    redis.call('HSET', KEYS[1], 'state', 'cancelled', 'attempts', '0', 'error', 'flow abandoned')
    redis.call('ZADD', KEYS[6], now, id)
    return 1
  end
  return row[1] == 'cancelled' and 2 or 0
end
if mode == 'cancel' then
  if row[1] ~= 'waiting' then return 0 end -- fence: released, failed or cancelled already
  ended(KEYS[1], KEYS[6], id, now)
  redis.call('ZREM', KEYS[2], id)
  redis.call('SPUBLISH', KEYS[8], id)
  if row[4] then flow_told(KEYS[8], id, row[4], 'cancelled') end -- its own parent is told
  return 1
end
local cid, cq = string.match(ARGV[3], '^(JOB%w+):(.+)$')
if not cid then return 0 end -- not a child of any flow: nothing changed
-- the settle is include/flows.lua's, the code a same-slot child's own script runs
return flow_told(KEYS[8], cid, id .. ':' .. string.sub(KEYS[8], 6, -11), outcome, cq)
