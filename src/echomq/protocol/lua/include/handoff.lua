-- handoff(parked, active, job, wake, id, payload, meta, rate, tok): lease a new job to a parked
-- consumer in the admission's own step (docs/decisions/0018-hand-off.md). Called only when pending is
-- empty (a parked consumer saw it empty and nothing has been queued since). Picks the
-- longest-parked live registration (member '<lease_ms>|<token>', score = its expiry on the
-- server clock), removes it (one registration, one job), writes the row as claim would
-- (state active, attempts 1: the fencing token), puts the lease on active with its
-- deadline, and publishes on the wake channel 'EMQH|<token>|<id>|1|<deadline>|<payload>':
-- everything the consumer needs to start. Returns false (nothing written) when no
-- consumer is parked. A consumer that died parked gets the job like any other lease it
-- held: the lease expires and reap re-exposes it. The claim gate (include/gate.lua, the
-- queue's rate log at rate) holds a hand-off as it holds a claim: none from a paused or
-- rate-limited queue (false, nothing written), and a job handed off takes a token.
-- tok: the admitting call's token, kept in the row as 'tok' ('' for none: docs/protocol.md,
-- "Call tokens").
-- @include now
-- @include gate
local function handoff(parked, active, job, wake, id, payload, meta, rate, tok)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', parked, '-inf', '(' .. fmt(now)) -- registrations past expiry
  local pick = redis.call('ZRANGE', parked, 0, 0)[1]
  if not pick then return false end
  local g = gate_open(meta, rate, nil, nil, now)
  if g.on and not gate_take(g, nil) then return false end -- threshold: the gate holds hand-off
  local lease, token = string.match(pick, '^(%d+)|(.+)$')
  redis.call('ZREM', parked, pick)
  if not lease then return false end -- not a registration park.lua wrote: dropped
  local deadline = fmt(now + tonumber(lease))
  redis.call('HSET', job, 'state', 'active', 'attempts', '1', 'payload', payload, 'tok', tok)
  redis.call('ZADD', active, deadline, id)
  gate_close(g)
  redis.call('SPUBLISH', wake, 'EMQH|' .. token .. '|' .. id .. '|1|' .. deadline .. '|' .. payload)
  return true
end
