"""The Lua scripts of `RedisSessionStore`: each session write is one atomic script, so a lease check and the
write it guards cannot be split by another replica.

A session `<p>s:<id>` is a hash (`rec` identity JSON, `token`, `tokh` its SHA-256, `turn` the running
turn id or "", `holder` the lease holder or "", `last` the last outcome JSON, `n` the event count);
its log is the stream `<p>s:<id>:ev` whose entry `0-<index+1>` holds the event's JSON in field `e`,
so reading from index N is one `XRANGE`/`XREAD` from `0-N`. `<p>running` is a sorted set of the
sessions with a running turn, scored by lease expiry (Redis server time, ms), which is what the
reaper scans. Events arrive as (prefix, suffix) pairs the script joins around the index it assigns.
"""

from __future__ import annotations

__all__ = ["APPEND", "BEGIN", "END", "LAPSED", "REAP", "RENEW", "ROTATE"]

_COMMON = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function append(h, ev, first)
  local n = tonumber(redis.call('HGET', h, 'n') or '0')
  for i = first, #ARGV, 2 do
    redis.call('XADD', ev, '0-' .. (n + 1), 'e', ARGV[i] .. n .. ARGV[i + 1])
    n = n + 1
  end
  redis.call('HSET', h, 'n', n)
  return n
end
"""

APPEND = (
    _COMMON
    + """
-- KEYS: hash, stream. ARGV: holder ('' = unfenced), operation id, then event pairs.
-- A retry of an operation that did land (its reply was lost) is recognised by its id: no duplicate.
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if redis.call('HGET', KEYS[1], 'op') == ARGV[2] then return 0 end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then return -1 end
append(KEYS[1], KEYS[2], 3)
-- Only a turn's writes are retried; a request's (unfenced) write must not overwrite the id a retry looks for.
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'op', ARGV[2]) end
return 0
"""
)

BEGIN = (
    _COMMON
    + """
-- KEYS: hash, stream, running. ARGV: session id, turn id, holder, lease ms, then event pairs.
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
local turn = redis.call('HGET', KEYS[1], 'turn')
if turn and turn ~= '' then return 0 end
redis.call('HSET', KEYS[1], 'turn', ARGV[2], 'holder', ARGV[3])
redis.call('ZADD', KEYS[3], now_ms() + tonumber(ARGV[4]), ARGV[1])
append(KEYS[1], KEYS[2], 5)
return 1
"""
)

RENEW = (
    _COMMON
    + """
-- KEYS: hash, running. ARGV: session id, holder, lease ms.
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[2] then return 0 end
redis.call('ZADD', KEYS[2], now_ms() + tonumber(ARGV[3]), ARGV[1])
return 1
"""
)

END = (
    _COMMON
    + """
-- KEYS: hash, stream, running. ARGV: session id, holder, last outcome JSON, operation id, then event pairs.
if redis.call('HGET', KEYS[1], 'op') == ARGV[4] then return 1 end
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[2] then return 0 end
append(KEYS[1], KEYS[2], 5)
redis.call('HSET', KEYS[1], 'turn', '', 'holder', '', 'last', ARGV[3], 'op', ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
"""
)

REAP = (
    _COMMON
    + """
-- KEYS: hash, stream, running. ARGV: session id, turn id, last outcome JSON, then event pairs.
local expiry = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not expiry or tonumber(expiry) > now_ms() then return 0 end
if redis.call('HGET', KEYS[1], 'turn') ~= ARGV[2] then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 0
end
append(KEYS[1], KEYS[2], 4)
redis.call('HSET', KEYS[1], 'turn', '', 'holder', '', 'last', ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
"""
)

LAPSED = (
    _COMMON
    + """
-- KEYS: running. ARGV: key prefix. Returns session id, turn id pairs whose lease expired.
local out = {}
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms())) do
  out[#out + 1] = sid
  out[#out + 1] = redis.call('HGET', ARGV[1] .. 's:' .. sid, 'turn') or ''
end
return out
"""
)

ROTATE = """
-- KEYS: hash. ARGV: expected digest ('' = any), new token, new digest, session id, prefix,
-- seconds a retired token is kept.
local current = redis.call('HGET', KEYS[1], 'tokh')
if not current then return -2 end
if ARGV[1] ~= '' and current ~= ARGV[1] then return 0 end
redis.call('DEL', ARGV[5] .. 'tok:' .. current)
redis.call('SET', ARGV[5] .. 'rtok:' .. current, ARGV[4], 'EX', tonumber(ARGV[6]))
redis.call('SET', ARGV[5] .. 'tok:' .. ARGV[3], ARGV[4])
redis.call('HSET', KEYS[1], 'token', ARGV[2], 'tokh', ARGV[3])
return 1
"""
