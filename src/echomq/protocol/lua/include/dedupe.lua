-- dedupe_args(dd, window): the checks of a dedupe window's key and length (throttle,
-- debounce; docs/protocol.md "Dedupe windows"). Reads no key. Returns the error reply
-- (EMQKEYS when dd is not emq:{q}:dd:<key> of KEYS[1]'s queue with a key of 1..800 bytes,
-- EMQARG when window is not an integer in 1..MAX), else nil and the window (ms).
local DEDUPE_MAX_MS = 2678400000 -- echomq.core.bounds.MAX_DEDUPE_MS: 31 days
local function dedupe_args(dd, window)
  local prefix = string.match(KEYS[1], '^emq:{[^}]*}:') .. 'dd:'
  local key = string.sub(dd, #prefix + 1)
  if string.sub(dd, 1, #prefix) ~= prefix or #key < 1 or #key > 800 then
    return redis.error_reply('EMQKEYS the dedupe key is not ' .. prefix .. '<1..800 bytes>')
  end
  local ms = tonumber(window)
  if not ms or ms < 1 or ms > DEDUPE_MAX_MS or ms ~= math.floor(ms) then -- threshold: the window's bound
    return redis.error_reply('EMQARG dedupe_ms must be an integer in 1..' .. DEDUPE_MAX_MS)
  end
  return nil, ms
end
