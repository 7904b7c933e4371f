//! A class's share of the burst, held exactly so that the hot path stays
//! in integers: `usable = ⌊share · burst⌋` with no rounding (module docs of
//! [`crate::PriorityLimiter`]).

/// 1.0 in parts per billion.
const ONE: u64 = 1_000_000_000;

/// A class's share of the burst, held exactly.
///
/// A share that is a decimal of at most nine places (0.3, 0.999999999) is
/// that decimal, in parts per billion; any other share is its exact binary
/// value `mantissa · 2^-shift`. Either way `usable` is `⌊share · burst⌋`
/// exactly, so `headroom = burst − usable = ⌈(1 − share) · burst⌉` exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Share {
    /// `ppb / 10^9`, with `ppb ≤ 10^9`.
    Decimal(u64),
    /// `mantissa · 2^-shift`, with `mantissa < 2^53` and `shift ≥ 53`.
    Binary { mantissa: u64, shift: u32 },
}

impl Share {
    /// The share of `share` ∈ (0, 1] (checked by the caller).
    pub(super) fn of(share: f64) -> Share {
        // share ≤ 1.0, so share·10^9 ≤ 10^9. Rounded half away from zero,
        // as `f64::round` (std only) does: `as` truncates, and the fraction
        // `x − trunc(x)` is exact for x < 2^52.
        let x = share * ONE as f64;
        let whole = x as u64;
        let ppb = if x - whole as f64 >= 0.5 {
            whole + 1
        } else {
            whole
        };
        // Division is correctly rounded: equality holds exactly when `share`
        // is the double nearest to the decimal ppb / 10^9, i.e. when it was
        // written as that decimal.
        if ppb as f64 / ONE as f64 == share {
            return Share::Decimal(ppb);
        }
        let bits = share.to_bits();
        let exponent = ((bits >> 52) & 0x7ff) as u32;
        let fraction = bits & ((1 << 52) - 1);
        // A double is fraction·2^-1074 when subnormal, else
        // (2^52 + fraction)·2^(exponent − 1075); share < 1.0 here, so
        // exponent ≤ 1022 and shift ≥ 53.
        let (mantissa, shift) = if exponent == 0 {
            (fraction, 1074)
        } else {
            (fraction | 1 << 52, 1075 - exponent)
        };
        Share::Binary { mantissa, shift }
    }

    /// Permits of `burst` that a class with this share may use:
    /// `⌊share · burst⌋`.
    #[inline]
    pub(super) fn usable(self, burst: u32) -> u32 {
        match self {
            // ppb · burst ≤ 10^9 · 2^32 < 2^62: no overflow; the quotient is
            // at most burst.
            Share::Decimal(ppb) => (ppb * u64::from(burst) / ONE) as u32,
            // mantissa · burst < 2^85 fits u128; shifting by 128 or more
            // would be an overflow, and any shift past 85 gives 0 anyway.
            Share::Binary { mantissa, shift } => {
                ((u128::from(mantissa) * u128::from(burst)) >> shift.min(127)) as u32
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn decimal_shares_are_held_as_written() {
        assert_eq!(Share::of(1.0), Share::Decimal(ONE));
        assert_eq!(Share::of(0.3), Share::Decimal(300_000_000));
        assert_eq!(Share::of(0.999999999), Share::Decimal(999_999_999));
        assert_eq!(Share::of(0.000000001), Share::Decimal(1));
        assert_eq!(Share::Decimal(ONE / 2).usable(3), 1);
        assert_eq!(Share::Decimal(700_000_000).usable(10), 7);
        assert_eq!(Share::Decimal(100_000_000).usable(10), 1);
        assert_eq!(Share::Decimal(1).usable(10), 0);
    }

    #[test]
    fn other_shares_are_their_exact_binary_value() {
        assert_eq!(
            Share::of(0.75 + 1.0 / (1u64 << 40) as f64),
            Share::Binary {
                mantissa: (3 << 51) + (1 << 13),
                shift: 53
            }
        );
        assert_eq!(
            Share::of(f64::MIN_POSITIVE / 4.0),
            Share::Binary {
                mantissa: 1 << 50,
                shift: 1074
            }
        );
        let below_one = Share::of(1.0 - f64::EPSILON / 2.0);
        assert_eq!(below_one.usable(u32::MAX), u32::MAX - 1);
        assert_eq!(below_one.usable(1), 0);
        assert_eq!(Share::of(1.0 / (1u64 << 30) as f64).usable(u32::MAX), 3);
        assert_eq!(Share::of(f64::MIN_POSITIVE).usable(u32::MAX), 0);
    }
}
