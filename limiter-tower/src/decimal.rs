//! [`Decimal`]: an unsigned integer's decimal digits, written on the stack
//! two at a time. The one integer formatter of the layer's own bytes: the
//! rate-limit header values, the numbers of problem documents and of keys.
//!
//! The digits are plain ASCII (`0`–`9`), no sign, no leading zeros (`0` is
//! one digit), at most 20 of them (`u64::MAX`). No formatting machinery, no
//! allocation: a caller copies [`Decimal::as_str`] where it goes.

/// The decimal pairs `00` to `99`, two bytes each.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// The decimal digits of a `u64`, on the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decimal {
    digits: [u8; 20],
    /// Where the digits start: they fill `digits[start..]`.
    start: usize,
}

impl Decimal {
    /// The digits of `n`, two per division.
    pub(crate) fn new(mut n: u64) -> Decimal {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        while n >= 100 {
            // n % 100 < 100: the cast keeps the pair's index.
            let pair = 2 * (n % 100) as usize;
            n /= 100;
            i -= 2;
            digits[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        }
        if n >= 10 {
            // n < 100 here.
            let pair = 2 * n as usize;
            i -= 2;
            digits[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        } else {
            i -= 1;
            // n < 10 here: the cast keeps the digit.
            digits[i] = b'0' + n as u8;
        }
        Decimal { digits, start: i }
    }

    /// The digits as bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }

    /// The digits as text.
    pub(crate) fn as_str(&self) -> &str {
        // Every byte of `digits[start..]` was written above as an ASCII
        // digit, so this never fails; the check is a few compares.
        std::str::from_utf8(self.as_bytes()).unwrap_or("0")
    }
}

/// The digits, so that a `Bytes` can own them where they are
/// (`Bytes::from_owner`: one allocation, shared by every clone).
impl AsRef<[u8]> for Decimal {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_whole() {
        // Every width, both parities of digit count, every pair boundary.
        let mut cases = vec![u64::from(u32::MAX), u64::MAX, u64::MAX - 1];
        let mut p = 1u64;
        for _ in 0..20 {
            cases.extend([
                p.saturating_sub(1),
                p,
                p.saturating_add(1),
                p.saturating_mul(9),
            ]);
            p = p.saturating_mul(10);
        }
        cases.extend(0..=1_000);
        for n in cases {
            let d = Decimal::new(n);
            assert_eq!(d.as_str(), n.to_string());
            assert_eq!(d.as_bytes(), n.to_string().as_bytes());
        }
    }
}
