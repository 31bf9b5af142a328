//! The floating-point element types narrower than `f32` that MLIR 19 has: `f16`, `bf16`
//! and the `f8` family, as bit patterns, with conversion to and from `f64` (round to
//! nearest, ties to even, as LLVM's `APFloat` converts constants).
//!
//! Three encodings share the layout sign, exponent, mantissa:
//! - IEEE (`f16`, `bf16`, `f8E5M2`, `f8E4M3`): the largest exponent is infinity (mantissa
//!   0) or NaN;
//! - finite (`f8E4M3FN`): no infinity; NaN is every exponent and mantissa bit set;
//!   overflow rounds to NaN of the value's sign;
//! - finite, unsigned zero (`f8E5M2FNUZ`, `f8E4M3FNUZ`, `f8E4M3B11FNUZ`): no infinity, no
//!   negative zero; NaN is the sign bit alone; overflow rounds to NaN.
//!
//! The types are listed once, in [`Format::of`] (each with its format); [`NARROW_FLOATS`],
//! an element's size ([`ElemType::size`]) and how a call passes one are derived from it.

use std::fmt;

use crate::signature::ElemType;

/// How a format spells infinity and NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Specials {
    Ieee,
    Finite,
    FiniteUnsignedZero,
}

/// A narrow floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    exponent_bits: u32,
    mantissa_bits: u32,
    bias: i32,
    specials: Specials,
}

/// Every narrow floating-point type, in the order of [`ElemType::SCALARS`]: the scalar
/// types [`Format::of`] has a format for (derived, not written again; a ninth type there
/// fails to compile here until the count is raised).
pub const NARROW_FLOATS: [ElemType; 8] = {
    let mut out = [ElemType::F16; 8];
    let mut found = 0;
    let mut i = 0;
    while i < ElemType::SCALARS.len() {
        if Format::of(ElemType::SCALARS[i]).is_some() {
            assert!(
                found < out.len(),
                "more narrow floats than NARROW_FLOATS holds"
            );
            out[found] = ElemType::SCALARS[i];
            found += 1;
        }
        i += 1;
    }
    assert!(
        found == out.len(),
        "fewer narrow floats than NARROW_FLOATS holds"
    );
    out
};

impl Format {
    /// The format of `elem`, if it is one of the narrow floating-point types: the one list
    /// of them (see the [module documentation](self)).
    pub const fn of(elem: ElemType) -> Option<Format> {
        let (exponent_bits, mantissa_bits, bias, specials) = match elem {
            ElemType::F16 => (5, 10, 15, Specials::Ieee),
            ElemType::BF16 => (8, 7, 127, Specials::Ieee),
            ElemType::F8E5M2 => (5, 2, 15, Specials::Ieee),
            ElemType::F8E4M3 => (4, 3, 7, Specials::Ieee),
            ElemType::F8E4M3FN => (4, 3, 7, Specials::Finite),
            ElemType::F8E5M2FNUZ => (5, 2, 16, Specials::FiniteUnsignedZero),
            ElemType::F8E4M3FNUZ => (4, 3, 8, Specials::FiniteUnsignedZero),
            ElemType::F8E4M3B11FNUZ => (4, 3, 11, Specials::FiniteUnsignedZero),
            _ => return None,
        };
        Some(Format {
            exponent_bits,
            mantissa_bits,
            bias,
            specials,
        })
    }

    /// Bytes of one value: 2 for `f16` and `bf16`, 1 for the `f8` types.
    pub const fn bytes(self) -> usize {
        ((1 + self.exponent_bits + self.mantissa_bits) / 8) as usize
    }

    fn sign_bit(self) -> u16 {
        1 << (self.exponent_bits + self.mantissa_bits)
    }

    fn exponent_max(self) -> u16 {
        (1 << self.exponent_bits) - 1
    }

    fn mantissa_mask(self) -> u16 {
        (1 << self.mantissa_bits) - 1
    }

    fn nan(self) -> u16 {
        match self.specials {
            // A quiet NaN: the top mantissa bit.
            Specials::Ieee => {
                (self.exponent_max() << self.mantissa_bits) | (1 << (self.mantissa_bits - 1))
            }
            Specials::Finite => (self.exponent_max() << self.mantissa_bits) | self.mantissa_mask(),
            Specials::FiniteUnsignedZero => self.sign_bit(),
        }
    }

    /// The largest finite value's bits (positive).
    fn max_finite(self) -> u16 {
        match self.specials {
            Specials::Ieee => {
                ((self.exponent_max() - 1) << self.mantissa_bits) | self.mantissa_mask()
            }
            Specials::Finite => {
                (self.exponent_max() << self.mantissa_bits) | (self.mantissa_mask() - 1)
            }
            Specials::FiniteUnsignedZero => {
                (self.exponent_max() << self.mantissa_bits) | self.mantissa_mask()
            }
        }
    }

    /// The value of `bits` (the low bits of the format's width; higher bits are ignored).
    pub fn decode(self, bits: u16) -> f64 {
        let width = self.exponent_bits + self.mantissa_bits + 1;
        let bits = bits & ((1u32 << width) - 1) as u16;
        let negative = bits & self.sign_bit() != 0;
        let exponent = (bits >> self.mantissa_bits) & self.exponent_max();
        let mantissa = bits & self.mantissa_mask();
        let magnitude = match self.specials {
            Specials::FiniteUnsignedZero if bits == self.sign_bit() => return f64::NAN,
            Specials::Finite
                if exponent == self.exponent_max() && mantissa == self.mantissa_mask() =>
            {
                return f64::NAN
            }
            Specials::Ieee if exponent == self.exponent_max() => {
                if mantissa != 0 {
                    return f64::NAN;
                }
                f64::INFINITY
            }
            _ if exponent == 0 => {
                f64::from(mantissa) * pow2(1 - self.bias - self.mantissa_bits as i32)
            }
            _ => {
                (1.0 + f64::from(mantissa) * pow2(-(self.mantissa_bits as i32)))
                    * pow2(i32::from(exponent) - self.bias)
            }
        };
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }

    /// `x` rounded to the nearest value of the format (ties to even).
    pub fn encode(self, x: f64) -> u16 {
        if x.is_nan() {
            // The sign is kept where the format has a signed NaN.
            return match self.specials {
                Specials::FiniteUnsignedZero => self.nan(),
                _ if x.is_sign_negative() => self.sign_bit() | self.nan(),
                _ => self.nan(),
            };
        }
        let sign = if x.is_sign_negative() {
            self.sign_bit()
        } else {
            0
        };
        // These formats have no negative zero (its bits are the NaN).
        let unsigned_zero = self.specials == Specials::FiniteUnsignedZero;
        let a = x.abs();
        let overflow = || match self.specials {
            Specials::Ieee => sign | (self.exponent_max() << self.mantissa_bits),
            Specials::Finite => sign | self.nan(),
            Specials::FiniteUnsignedZero => self.nan(),
        };
        if a.is_infinite() {
            return overflow();
        }
        if a == 0.0 {
            return if unsigned_zero { 0 } else { sign };
        }
        let m = self.mantissa_bits as i32;
        let min_normal_exponent = 1 - self.bias;
        // The exponent of `a`, from its f64 bits (exact, subnormal f64s included).
        let exponent = a.log2().floor() as i32;
        let exponent = if pow2(exponent) > a {
            exponent - 1
        } else if pow2(exponent + 1) <= a {
            exponent + 1
        } else {
            exponent
        };
        // `a` in units of the format's last place at that exponent: scaling by a power
        // of two is exact, so one rounding (to an integer) is the only one.
        let scale = exponent.max(min_normal_exponent) - m;
        let q = (a * pow2(-scale)).round_ties_even();
        // Below the normal range `q` is the whole encoding (a mantissa that carries into
        // the exponent field is the smallest normal); above, the exponent field is added.
        let bits = if exponent < min_normal_exponent {
            q as u64
        } else {
            let q = q as u64;
            let (e, q) = if q >> (m + 1) != 0 {
                (exponent + 1, q >> 1)
            } else {
                (exponent, q)
            };
            let field = (e + self.bias) as u64;
            (field << m) | (q & u64::from(self.mantissa_mask()))
        };
        if bits > u64::from(self.max_finite()) {
            return overflow();
        }
        if bits == 0 && unsigned_zero {
            return 0;
        }
        sign | bits as u16
    }
}

fn pow2(e: i32) -> f64 {
    2f64.powi(e)
}

/// A value of a narrow floating-point type: its type and its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SmallFloat {
    elem: ElemType,
    bits: u16,
}

impl SmallFloat {
    /// `bits` as a value of `elem`, if `elem` is a narrow floating-point type (the bits
    /// above its width are dropped).
    pub fn from_bits(elem: ElemType, bits: u16) -> Option<SmallFloat> {
        let format = Format::of(elem)?;
        let width = format.exponent_bits + format.mantissa_bits + 1;
        Some(SmallFloat {
            elem,
            bits: bits & ((1u32 << width) - 1) as u16,
        })
    }

    /// `x` rounded to `elem` (nearest, ties to even), if `elem` is a narrow floating-point
    /// type.
    pub fn from_f64(elem: ElemType, x: f64) -> Option<SmallFloat> {
        let bits = Format::of(elem)?.encode(x);
        Some(SmallFloat { elem, bits })
    }

    /// Its type.
    pub fn elem(self) -> ElemType {
        self.elem
    }

    /// Its bits (in the low 8 or 16 bits).
    pub fn bits(self) -> u16 {
        self.bits
    }

    /// Its value, exactly.
    pub fn to_f64(self) -> f64 {
        Format::of(self.elem).map_or(f64::NAN, |f| f.decode(self.bits))
    }
}

impl fmt::Display for SmallFloat {
    /// The shortest decimal that reads back as the same `f32` (every narrow type's values
    /// are `f32` values).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_f64() as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(elem: ElemType, x: f64) -> u16 {
        SmallFloat::from_f64(elem, x).map_or(0xFFFF, SmallFloat::bits)
    }

    #[test]
    fn known_values() {
        use ElemType::*;
        // f16: one, the largest finite, the first value that rounds to infinity, the
        // smallest subnormal and half of it (a tie, to even: zero), a third.
        assert_eq!(bits(F16, 1.0), 0x3c00);
        assert_eq!(bits(F16, 65504.0), 0x7bff);
        assert_eq!(bits(F16, 65520.0), 0x7c00);
        assert_eq!(bits(F16, -65519.0), 0xfbff);
        assert_eq!(bits(F16, 2f64.powi(-24)), 0x0001);
        assert_eq!(bits(F16, 2f64.powi(-25)), 0x0000);
        assert_eq!(bits(F16, 1.5 * 2f64.powi(-24)), 0x0002);
        assert_eq!(bits(F16, 1.0 / 3.0), 0x3555);
        assert_eq!(bits(F16, f64::NEG_INFINITY), 0xfc00);
        assert_eq!(bits(F16, -0.0), 0x8000);
        // bf16
        assert_eq!(bits(BF16, 1.0), 0x3f80);
        assert_eq!(bits(BF16, std::f64::consts::PI), 0x4049);
        // f8E4M3FN: 448 is the largest; 464 ties to 448 (even mantissa); 480 is NaN.
        assert_eq!(bits(F8E4M3FN, 448.0), 0x7e);
        assert_eq!(bits(F8E4M3FN, 464.0), 0x7e);
        assert_eq!(bits(F8E4M3FN, 480.0), 0x7f);
        assert_eq!(bits(F8E4M3FN, f64::INFINITY), 0x7f);
        assert_eq!(bits(F8E4M3FN, -1000.0), 0xff);
        assert_eq!(bits(F8E4M3FN, -2.0), 0xc0);
        // f8E5M2: IEEE-like, 57344 the largest.
        assert_eq!(bits(F8E5M2, 57344.0), 0x7b);
        assert_eq!(bits(F8E5M2, 65536.0), 0x7c);
        // FNUZ: no negative zero, NaN is 0x80, bias 8 / 16 / 11.
        assert_eq!(bits(F8E4M3FNUZ, -0.0), 0x00);
        assert_eq!(bits(F8E4M3FNUZ, f64::NAN), 0x80);
        assert_eq!(bits(F8E4M3FNUZ, 1.0), 0x40);
        assert_eq!(bits(F8E5M2FNUZ, 1.0), 0x40);
        assert_eq!(bits(F8E4M3B11FNUZ, 1.0), 0x58);
        assert_eq!(bits(F8E4M3FNUZ, 1000.0), 0x80);
        // f8E4M3: IEEE-like, 240 the largest, then infinity.
        assert_eq!(bits(F8E4M3, 240.0), 0x77);
        assert_eq!(bits(F8E4M3, 1000.0), 0x78);
    }

    #[test]
    fn every_bit_pattern_round_trips() {
        for elem in NARROW_FLOATS {
            let width = 8 * elem.size() as u32;
            for b in 0..(1u32 << width) {
                let v = SmallFloat::from_bits(elem, b as u16).map(SmallFloat::to_f64);
                let Some(v) = v else { panic!("{elem}") };
                if v.is_nan() {
                    continue;
                }
                assert_eq!(bits(elem, v), b as u16, "{elem} {b:#x} = {v}");
            }
        }
    }
}
