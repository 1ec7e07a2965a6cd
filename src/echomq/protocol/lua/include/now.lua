-- now_ms(): the server clock in whole milliseconds. Time never comes from a client.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- fmt(n): an integer as a decimal string (tostring would give 1.7e+12 for large numbers).
local function fmt(n)
  return string.format('%.0f', n)
end
