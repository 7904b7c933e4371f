//! [`KeyedBuilder`]: the cap on keys, what happens when full, per-key
//! quotas and the clock of a [`KeyedLimiter`], checked when it is built.

use super::*;

/// Builds a [`KeyedLimiter`]; see [`KeyedLimiter::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct KeyedBuilder<K, C> {
    quota: Quota,
    clock: C,
    max_keys: usize,
    when_full: WhenFull,
    overrides: StdHashMap<K, Quota>,
    max_overrides: usize,
}

impl<K, C> core::fmt::Debug for KeyedBuilder<K, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyedBuilder")
            .field("quota", &self.quota)
            .field("max_keys", &self.max_keys)
            .field("when_full", &self.when_full)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedBuilder<K, C> {
    /// A builder reading `clock`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Clock, ManualClock, Quota};
    /// use limiter_keyed::{KeyedBuilder, KeyedLimiter};
    ///
    /// let limiter: KeyedLimiter<u64, ManualClock> =
    ///     KeyedBuilder::with_clock(Quota::per_second(10)?, ManualClock::starting_at(5)).build()?;
    /// assert_eq!(limiter.clock().now(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(quota: Quota, clock: C) -> KeyedBuilder<K, C> {
        KeyedBuilder {
            quota,
            clock,
            max_keys: DEFAULT_MAX_KEYS,
            when_full: WhenFull::default(),
            overrides: StdHashMap::new(),
            max_overrides: DEFAULT_MAX_OVERRIDES,
        }
    }

    /// The most keys tracked at once (default
    /// [`DEFAULT_MAX_KEYS`](KeyedLimiter::DEFAULT_MAX_KEYS)); at least 1,
    /// checked by [`build`](KeyedBuilder::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::{KeyedError, KeyedLimiter};
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(1)?)
    ///     .max_keys(2)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire(&1)?;
    /// limiter.try_acquire(&2)?;
    /// assert_eq!(limiter.try_acquire(&3), Err(KeyedError::TooManyKeys { max_keys: 2 }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// What to do with a new key when full (default
    /// [`WhenFull::RejectNewKeys`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::{KeyedLimiter, WhenFull};
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(1)?)
    ///     .max_keys(1)
    ///     .when_full(WhenFull::EvictLeastRecent)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire(&"alice")?;
    /// limiter.try_acquire(&"bob")?; // "alice" is forgotten to make room
    /// assert!(limiter.try_acquire(&"alice").is_ok()); // back full, evicting "bob"
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn when_full(mut self, when_full: WhenFull) -> Self {
        self.when_full = when_full;
        self
    }

    /// Gives `key` its own quota instead of the shared one.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(1)?)
    ///     .quota_for("admin", Quota::per_second(100)?.with_burst(10)?)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert!(limiter.try_acquire_n(&"admin", 10).is_ok());
    /// assert!(limiter.try_acquire_n(&"guest", 2).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota_for(mut self, key: K, quota: Quota) -> Self {
        self.overrides.insert(key, quota);
        self
    }

    /// The most keys that may have their own quota (default
    /// [`DEFAULT_MAX_OVERRIDES`](crate::DEFAULT_MAX_OVERRIDES)), counting
    /// those given by [`quota_for`](KeyedBuilder::quota_for) (checked by
    /// [`build`](KeyedBuilder::build)) and those set live by
    /// [`set_quota_for`](KeyedLimiter::set_quota_for), which refuses one
    /// more with [`OverrideError`](crate::OverrideError).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::{KeyedLimiter, OverrideError};
    ///
    /// let limiter = KeyedLimiter::<&str>::builder(Quota::per_second(10)?).max_overrides(1).build()?;
    /// limiter.set_quota_for(&"a", Quota::per_second(1)?)?;
    /// let refused = limiter.set_quota_for(&"b", Quota::per_second(1)?);
    /// assert_eq!(refused, Err(OverrideError::TooManyOverrides { max_overrides: 1 }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_overrides(mut self, max_overrides: usize) -> Self {
        self.max_overrides = max_overrides;
        self
    }

    /// Reads `clock` instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Clock, ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<&str, _>::builder(Quota::per_second(1)?)
    ///     .clock(ManualClock::starting_at(42))
    ///     .build()?;
    /// assert_eq!(limiter.clock().now(), 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> KeyedBuilder<K, C2> {
        KeyedBuilder {
            quota: self.quota,
            clock,
            max_keys: self.max_keys,
            when_full: self.when_full,
            overrides: self.overrides,
            max_overrides: self.max_overrides,
        }
    }

    /// The limiter, with no key yet.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] for `max_keys == 0`, or for more
    /// [`quota_for`](KeyedBuilder::quota_for) keys than
    /// [`max_overrides`](KeyedBuilder::max_overrides).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Quota, QuotaError};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let zero = KeyedLimiter::<u64>::builder(Quota::per_second(1)?).max_keys(0).build();
    /// assert!(matches!(zero, Err(QuotaError::InvalidParameter { name: "max_keys", .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(self) -> Result<KeyedLimiter<K, C>, QuotaError> {
        if self.max_keys == 0 {
            return Err(QuotaError::InvalidParameter {
                name: "max_keys",
                requirement: "at least 1",
            });
        }
        if self.overrides.len() > self.max_overrides {
            return Err(QuotaError::InvalidParameter {
                name: "max_overrides",
                requirement: "at least the number of keys given a quota_for",
            });
        }
        Ok(self.assemble())
    }

    pub(super) fn assemble(self) -> KeyedLimiter<K, C> {
        let origin = self.clock.now();
        let override_count = AtomicUsize::new(self.overrides.len());
        let overrides = HashIndex::with_capacity(self.overrides.len());
        for (key, quota) in self.overrides {
            let _ = overrides.insert_sync(key, quota);
        }
        KeyedLimiter {
            map: HashIndex::with_capacity(self.max_keys.clamp(1, PRESIZED_KEYS)),
            shared: SharedQuota::new(self.quota),
            overrides,
            override_lock: Mutex::new(()),
            override_count,
            max_overrides: self.max_overrides,
            clock: self.clock,
            max_keys: self.max_keys.max(1),
            when_full: self.when_full,
            origin,
            refunds: CellRefunds::new(),
            count: AtomicUsize::new(0),
            cursor: Mutex::new(Cursor::new()),
            inserted_min: AtomicU64::new(u64::MAX),
            next_idle_at: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }
}
