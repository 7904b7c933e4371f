-- limiter-redis: several GCRA limits decided as one, atomically on Redis:
-- all are charged, or none. src/multi.rs documents the reply; the math per
-- key is gcra.lua's (docs/distributed.md).
--
-- KEYS[1..m]  the limiter keys (distinct; one slot on a cluster); each value
--             is that key's tat, integer microseconds.
-- ARGV[1]     max_wait in µs (0 = a try)
-- ARGV[2]     extra ms added to each key's TTL
-- ARGV[3]     now in µs, or '' to read Redis' own TIME
-- ARGV[4 + 3(i-1) ..]  for key i: t (µs >= 1), burst (>= 1), n (0 <= n <= burst)
--
-- Every number is an integer below 2^53 (exact in Lua's doubles); division
-- goes through math.fmod. A denial writes nothing; a grant writes every key
-- with n > 0.
-- Reply: { allowed (0|1), wait or retry_after, then per key i:
--          remaining_i, reset_after_i } with times in µs. On a grant, the
-- wait is the longest of the keys' slots; on a denial, retry_after is when
-- every key conforms at once (the longest of their waits).

local LIMIT = 9007199254740991 -- 2^53 - 1

local max_wait = tonumber(ARGV[1])
local margin = tonumber(ARGV[2])
local now
if ARGV[3] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[3])
end

local function idiv(a, b)
  return (a - math.fmod(a, b)) / b
end

local m = #KEYS
local t, n, base, room, span = {}, {}, {}, {}, {}
local allowed = true
local longest = 0 -- the longest wait (grant) or need (denial), µs
for i = 1, m do
  local j = 4 + 3 * (i - 1)
  t[i] = tonumber(ARGV[j])
  local burst = tonumber(ARGV[j + 1])
  n[i] = tonumber(ARGV[j + 2])
  span[i] = t[i] * burst
  local stored = redis.call('GET', KEYS[i])
  local tat = now
  if stored then
    tat = tonumber(stored)
  end
  base[i] = math.max(tat, now)
  room[i] = now + span[i] - base[i]
  if n[i] > 0 then
    -- need > 0: the key's slot is `need` away; the request conforms then.
    local need = n[i] * t[i] - room[i]
    if need > max_wait then
      allowed = false
    end
    if need > longest then
      longest = need
    end
  end
end

local function permits(i, r)
  if r < t[i] then
    return 0
  end
  return idiv(r, t[i])
end

local reply = { allowed and 1 or 0, longest }
if not allowed then
  for i = 1, m do
    reply[#reply + 1] = permits(i, room[i])
    reply[#reply + 1] = base[i] - now
  end
  return reply
end

-- Check every new tat before writing any, so an error writes nothing.
local new_tat = {}
for i = 1, m do
  new_tat[i] = base[i] + n[i] * t[i]
  if new_tat[i] > LIMIT then
    return redis.error_reply('ERR limiter-redis: tat past 2^53 microseconds')
  end
end
for i = 1, m do
  local debt = new_tat[i] - now
  if n[i] > 0 then
    local ms = idiv(debt, 1000)
    if math.fmod(debt, 1000) > 0 then
      ms = ms + 1
    end
    redis.call('SET', KEYS[i], string.format('%d', new_tat[i]), 'PX', string.format('%d', ms + margin))
  end
  reply[#reply + 1] = permits(i, room[i] - n[i] * t[i])
  reply[#reply + 1] = debt
end
return reply
