#!lua
-- name: cache_shadow
-- summary: build a cache value in its own fresh shadow key, whole and with its TTL
-- KEYS[1] shadow: cm:cache:{<table>:<key>}:shadow:<token>, hash, unique per write
-- ARGV[1] ttl_ms: the entry's time to live (>= 1)
-- ARGV[2..] fields: field, value, field, value, ...
-- RETURNS: 1
-- ERRORS: EMQARG a bad TTL, or an odd, empty or too long (> 100 fields) list; nothing written
local ttl = tonumber(ARGV[1])
if not ttl or ttl < 1 or #ARGV < 3 or #ARGV > 201 or #ARGV % 2 == 0 then
  return redis.error_reply('EMQARG cache_shadow: bad ttl or fields')
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
