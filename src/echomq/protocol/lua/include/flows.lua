-- flow_told(finished, id, parent, outcome, from): a job of a flow ended (outcome 'done',
-- 'dead', 'cancelled' or 'expired'). finished is emq:{q}:finished of the script's queue q
-- (the shape check made it a key of the queue of KEYS[1]); parent is the ended job's row
-- field 'parent', '<parent id>:<parent queue>'; from is the ended job's queue when it is not
-- q (flow_parent's settle: the relay brings a child of another queue), nil when it is q.
-- Called only for a job that has a parent; a job outside any flow never gets here, so it
-- pays nothing (the function is this include's only definition, as before this path).
-- * The parent's queue is not q: the notice '<outcome>:<parent>' is recorded under id in
--   the hash finished (the key of the same name as the finished shard channel; keys and
--   channels are separate namespaces). The relay carries it (decision 0038). Returns nil.
-- * The parent's queue is q (the same hash tag, so the same slot): the parent is settled
--   here, in the script that ended the child: no notice, nothing for the relay. Its keys are
--   derived from finished by one rule (docs/protocol.md, "Same-slot settle"): the prefix
--   emq:{q}: followed by job:<parent id>, waiting, pending, delayed, dead, flows (the
--   queue's counts of parents released and failed), or the channel wake. The child's field records the outcome once (a repeat changes nothing); a failed
--   child fails the parent under policy 'fail' (-> dead, and its own parent is told, here
--   again when in q); the last child releases it waiting -> pending once (the row counts
--   'released'), or -> delayed when the step has options to apply: due after its 'delay',
--   or due now when it has a lane or a priority, which promote applies (include/pend.lua).
--   Returns 2 released | 1 counted | 3 the parent failed | 0 a repeat, not waiting, or not
--   its child (nothing changed).
-- A failed parent's own parent in q is settled in the same call, as a loop (no recursion)
-- and with the clock read inline: the function captures no upvalue, so creating it costs
-- every script that includes it exactly what the notice-only function did (decision 0041).
local function flow_told(finished, id, parent, outcome, from)
  local q, verdict = string.sub(finished, 6, -11), nil -- emq:{q}:finished
  local p = string.sub(finished, 1, -9) -- emq:{q}:
  while true do
    local pid, pq = string.match(parent, '^([^:]+):(.+)$')
    if pq ~= q then
      redis.call('HSET', finished, id, outcome .. ':' .. parent)
      return verdict
    end
    local job, child = p .. 'job:' .. pid, id .. ':' .. (from or q)
    local row = redis.call('HMGET', job, 'state', 'children', 'policy', 'parent', 'delay', 'lane', 'prio')
    if row[1] ~= 'waiting' then return verdict or 0 end -- fence: released, failed or cancelled already
    local field = 'c:' .. child
    if redis.call('HGET', job, field) ~= '' then return verdict or 0 end -- fence: a repeat, or not a child
    redis.call('HSET', job, field, outcome)
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if outcome ~= 'done' and row[3] ~= 'ignore' then redis.call('HINCRBY', job, 'failed', 1) end
    if outcome ~= 'done' and row[3] == 'fail' then -- the policy: a failed child fails the parent
      redis.call('HSET', job, 'state', 'dead', 'error', 'child ' .. child .. ' ' .. outcome)
      redis.call('ZADD', p .. 'dead', now, pid)
      redis.call('ZREM', p .. 'waiting', pid)
      redis.call('HINCRBY', p .. 'flows', 'failed', 1) -- the server's counts (metrics)
      redis.call('SPUBLISH', finished, pid)
      if not row[4] then return verdict or 3 end
      id, parent, outcome, from, verdict = pid, row[4], 'dead', nil, verdict or 3 -- its own parent
    else
      local settled = redis.call('HINCRBY', job, 'settled', 1)
      if settled < tonumber(row[2]) then return verdict or 1 end -- threshold: children still running
      redis.call('ZREM', p .. 'waiting', pid)
      redis.call('HINCRBY', job, 'released', 1) -- the server's own count of releases: 1, ever
      redis.call('HINCRBY', p .. 'flows', 'released', 1) -- the queue's, read by the metrics
      if row[5] or row[6] or row[7] then -- a step's options: promote files it (lane, priority)
        redis.call('HSET', job, 'state', 'delayed')
        redis.call('ZADD', p .. 'delayed', now + tonumber(row[5] or '0'), pid)
        return verdict or 2
      end
      redis.call('HSET', job, 'state', 'pending')
      redis.call('ZADD', p .. 'pending', 0, pid)
      if redis.call('ZCARD', p .. 'pending') == 1 then redis.call('SPUBLISH', p .. 'wake', pid) end
      return verdict or 2
    end
  end
end
