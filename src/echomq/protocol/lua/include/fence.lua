-- fence(meta): the protocol version fence, run by every script before its first write
-- (docs/decisions/0009). Reads only. Returns the EMQVERSION error reply when the queue
-- records another major version, else nil and whether a version is recorded at all (an
-- admission records PROTOCOL on a queue that has none, after all its other checks).
-- fence(meta, field, ...): the same, reading the named fields of meta in the same HMGET;
-- returns a third value, the HMGET's reply (its [1] the version, then the fields).
local PROTOCOL = 'echomq:3.0.0' -- echomq.core.model.PROTOCOL; the loader refuses a mismatch
local function fence(meta, ...)
  local m, recorded = nil, nil
  if ... then
    m = redis.call('HMGET', meta, 'protocol', ...)
    recorded = m[1]
  else
    recorded = redis.call('HGET', meta, 'protocol')
  end
  if not recorded then return nil, false, m end
  if recorded == PROTOCOL then return nil, true, m end -- the common case: no pattern matching
  local theirs = string.match(recorded, '^echomq:(%d+)%.')
  local ours = string.match(PROTOCOL, '^echomq:(%d+)%.')
  if theirs ~= ours then -- fence: another major version
    return redis.error_reply('EMQVERSION queue speaks ' .. recorded .. ', client speaks ' .. PROTOCOL), true
  end
  return nil, true, m
end
