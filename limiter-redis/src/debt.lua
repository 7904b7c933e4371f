-- limiter-redis: charge a key permits after admission, as capped GCRA
-- debt, atomically on Redis. The same units and names as gcra.lua; the
-- cap is limiter-core's (src/debt.rs documents the reply).
--
-- KEYS[1]  the limiter key; its value is tat, integer microseconds.
-- ARGV[1]  t, the emission interval, integer µs >= 1
-- ARGV[2]  burst, integer >= 1 (tau = t * (burst - 1))
-- ARGV[3]  n, permits to charge, integer >= 0 (below 2^53 / t)
-- ARGV[4]  cap in µs: the next single permit comes at most max(cap, t)
--          after the charge, that is tat <= now + tau + t + max(cap - t, 0)
-- ARGV[5]  extra ms added to the key's TTL (0 = expire exactly at tat)
-- ARGV[6]  now in µs, or '' to read Redis' own TIME
--
-- tat moves forward from max(tat, now) by k * t, k the most whole permits
-- of n that stay under the cap; the rest is dropped. Charging nothing
-- writes nothing. Every number is an integer below 2^53 (exact in Lua's
-- doubles); division goes through math.fmod, which is exact.
-- Reply: { charged, dropped, reset_after } with reset_after = tat - now in µs.

local LIMIT = 9007199254740991 -- 2^53 - 1

local key = KEYS[1]
local t = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local margin = tonumber(ARGV[5])

local now
if ARGV[6] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[6])
end

-- floor(a / b) for integers a >= 0, b >= 1, exactly.
local function idiv(a, b)
  return (a - math.fmod(a, b)) / b
end

local stored = redis.call('GET', key)
local tat = now
if stored then
  tat = tonumber(stored)
end
local base = math.max(tat, now)
local over = cap - t
if over < 0 then
  over = 0
end
local limit = now + t * burst + over
local fits = 0
if limit > base then
  fits = idiv(limit - base, t)
end
local charged = math.min(n, fits)
if charged == 0 then
  return { 0, n, math.max(tat - now, 0) }
end
local new_tat = base + charged * t
if new_tat > LIMIT then
  return redis.error_reply('ERR limiter-redis: tat past 2^53 microseconds')
end
local debt = new_tat - now
local ms = idiv(debt, 1000)
if math.fmod(debt, 1000) > 0 then
  ms = ms + 1
end
redis.call('SET', key, string.format('%d', new_tat), 'PX', string.format('%d', ms + margin))
return { charged, n - charged, debt }
