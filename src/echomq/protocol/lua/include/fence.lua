-- fence(meta): the protocol version fence, run by every script before its first write
-- (docs/decisions/0009). Reads only. Returns the EMQVERSION error reply when the queue
-- records another major version, else nil and whether a version is recorded at all (an
-- admission records PROTOCOL on a queue that has none, after all its other checks).
local PROTOCOL = 'echomq:3.0.0' -- echomq.core.model.PROTOCOL; the loader refuses a mismatch
local function fence(meta)
  local recorded = redis.call('HGET', meta, 'protocol')
  if not recorded then return nil, false end
  if recorded == PROTOCOL then return nil, true end -- the common case: no pattern matching
  local theirs = string.match(recorded, '^echomq:(%d+)%.')
  local ours = string.match(PROTOCOL, '^echomq:(%d+)%.')
  if theirs ~= ours then -- fence: another major version
    return redis.error_reply('EMQVERSION queue speaks ' .. recorded .. ', client speaks ' .. PROTOCOL), true
  end
  return nil, true
end
