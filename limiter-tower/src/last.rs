//! [`Last`]: a value a thread made from a key, kept with that key and
//! cloned while the key repeats.
//!
//! The layer's own bytes on a response (the rate-limit header values,
//! `Retry-After`, the `429` document) are made from a few numbers that
//! repeat from one response to the next: a key far from its limit states
//! the same `r` and `t` every time, and the refusals of one millisecond the
//! same wait. Each thread keeps the last value it made in a `Last` of its
//! own (a `thread_local!`: no lock, no atomic on the lookup) and answers a
//! repeat with a clone, which for `Bytes` and `HeaderValue` is a reference
//! count instead of formatting and an allocation. A key that changes on
//! every response pays the compare, and a value that is not shared from
//! the start (a `Bytes` made from a `Vec` allocates its shared count on
//! its first clone) one allocation more: so the values whose numbers can
//! change on every response (`RateLimit`, `Retry-After`) are made shared
//! from the start (`Bytes::from_owner`, one allocation).

/// The last value made, with the key it was made from.
#[derive(Debug)]
pub(crate) struct Last<K, V>(Option<(K, V)>);

impl<K: PartialEq, V: Clone> Last<K, V> {
    /// Nothing kept yet.
    pub(crate) const fn new() -> Last<K, V> {
        Last(None)
    }

    /// The value of `key`: the kept one when `key` is the kept key, else
    /// `make()`, kept in its place.
    // Inlined: the compare and the clone are the whole of a repeat.
    #[inline]
    pub(crate) fn get(&mut self, key: K, make: impl FnOnce() -> V) -> V {
        match &self.0 {
            Some((kept, value)) if *kept == key => value.clone(),
            _ => {
                let value = make();
                self.0 = Some((key, value.clone()));
                value
            }
        }
    }

    /// Forgets the kept value.
    pub(crate) fn clear(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_the_kept_value_and_a_new_key_is_made_anew() {
        let mut last = Last::new();
        let mut made = Vec::new();
        let mut get = |last: &mut Last<u32, String>, key: u32| {
            last.get(key, || {
                made.push(key);
                format!("v{key}")
            })
        };
        let values: Vec<String> = [1, 1, 2, 2, 1]
            .into_iter()
            .map(|key| get(&mut last, key))
            .collect();
        assert_eq!(values, ["v1", "v1", "v2", "v2", "v1"]);
        last.clear();
        assert_eq!(get(&mut last, 1), "v1");
        assert_eq!(made, [1, 2, 1, 1], "made once per change of key");
    }
}
