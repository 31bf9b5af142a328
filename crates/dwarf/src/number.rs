//! Values printed as numbers of their base type, as gdb prints them: signed
//! and unsigned integers in decimal (the generic type is signed: gdb's
//! `<signed DWARF address type>`), floats with C's `%g` at 9 significant
//! digits for 4-byte and 17 for 8-byte types (enough to read back the same
//! bits), `inf`, and NaNs with their payload (`-nan(0x8000000000000)`).

use alloc::format;
use alloc::string::String;
use core::fmt;

use crate::value::{Value, ValueType};

/// A [`Value`] shown as gdb shows a number of its type; see
/// [`Value::number`].
#[derive(Clone, Copy, Debug)]
pub struct Number {
    value: Value,
    address_size: u8,
}

impl Value {
    /// The value as gdb prints a number of its base type.
    ///
    /// ```
    /// use locus_dwarf::{Value, ValueType};
    /// assert_eq!(Value::generic(u64::MAX - 4, 8).number(8).to_string(), "-5");
    /// assert_eq!(Value::new(ValueType::Unsigned(1), 0xff, 8).number(8).to_string(), "255");
    /// assert_eq!(Value::float(4, 0.1).number(8).to_string(), "0.100000001");
    /// assert_eq!(Value::float(8, 0.1).number(8).to_string(), "0.10000000000000001");
    /// assert_eq!(Value::float(8, 1e100).number(8).to_string(), "1e+100");
    /// ```
    pub fn number(self, address_size: u8) -> Number {
        Number {
            value: self,
            address_size,
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.value;
        match v.ty {
            ValueType::Generic | ValueType::Signed(_) => {
                write!(f, "{}", v.to_i64(self.address_size))
            }
            ValueType::Unsigned(_) => write!(f, "{}", v.to_u64()),
            ValueType::Float(4) => {
                let bits = v.to_u64() as u32;
                let x = f32::from_bits(bits);
                let payload = u64::from(bits & 0x7f_ffff);
                f.write_str(&float_g(f64::from(x), 9, bits >> 31 == 1, payload))
            }
            ValueType::Float(_) => {
                let bits = v.to_u64();
                let payload = bits & ((1 << 52) - 1);
                f.write_str(&float_g(f64::from_bits(bits), 17, bits >> 63 == 1, payload))
            }
        }
    }
}

/// C's `%.{precision}g`, with gdb's spelling of NaNs.
fn float_g(x: f64, precision: usize, negative: bool, nan_payload: u64) -> String {
    let sign = if negative { "-" } else { "" };
    if x.is_nan() {
        return format!("{sign}nan({nan_payload:#x})");
    }
    if x.is_infinite() {
        return format!("{sign}inf");
    }
    let magnitude = if negative { -x } else { x };
    if magnitude == 0.0 {
        return format!("{sign}0");
    }
    // The exponent of the `%e` form decides between `%e` and `%f`.
    let e_form = format!("{:.*e}", precision - 1, magnitude);
    let (mantissa, exponent) = e_form.split_once('e').unwrap_or((e_form.as_str(), "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    if exponent < -4 || exponent >= precision as i64 {
        let e_sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{sign}{}e{e_sign}{:02}",
            trim_fraction(mantissa),
            exponent.unsigned_abs()
        )
    } else {
        let decimals = (precision as i64 - 1 - exponent).max(0) as usize;
        let fixed = format!("{magnitude:.decimals$}");
        format!("{sign}{}", trim_fraction(&fixed))
    }
}

/// `%g` drops trailing zeros of the fraction, and the point if none remain.
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    /// What gdb 13 prints for `p (float)X` and `p X`.
    #[test]
    fn as_gdb_prints_floats() {
        let f32s: &[(f32, &str)] = &[
            (0.1, "0.100000001"),
            (3.0, "3"),
            (1e9, "1e+09"),
            (1e-40, "9.9999461e-41"),
        ];
        for (x, s) in f32s {
            assert_eq!(Value::float(4, f64::from(*x)).number(8).to_string(), *s);
        }
        let f64s: &[(f64, &str)] = &[
            (0.1, "0.10000000000000001"),
            (1e100, "1e+100"),
            (f64::INFINITY, "inf"),
            (1.5, "1.5"),
            (100000000.0, "100000000"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (123456789012.0, "123456789012"),
            (1e-5, "1.0000000000000001e-05"),
            (0.0001, "0.0001"),
            (5e-324, "4.9406564584124654e-324"),
            (2.5e-310, "2.5000000000000171e-310"),
            (-0.0, "-0"),
            (-2.5, "-2.5"),
        ];
        for (x, s) in f64s {
            assert_eq!(Value::float(8, *x).number(8).to_string(), *s);
        }
        // x86's default NaN, as gdb prints `0.0/0`.
        let nan = Value::new(ValueType::Float(8), 0xfff8_0000_0000_0000, 8);
        assert_eq!(nan.number(8).to_string(), "-nan(0x8000000000000)");
        let nan = Value::new(ValueType::Float(4), 0x7fc0_0000, 8);
        assert_eq!(nan.number(8).to_string(), "nan(0x400000)");
    }

    #[test]
    fn integers_in_decimal() {
        assert_eq!(Value::generic(u64::MAX, 8).number(8).to_string(), "-1");
        assert_eq!(Value::generic(0xffff_ffff, 4).number(4).to_string(), "-1");
        assert_eq!(
            Value::new(ValueType::Signed(2), 0x8000, 8)
                .number(8)
                .to_string(),
            "-32768"
        );
        assert_eq!(
            Value::new(ValueType::Unsigned(8), u64::MAX, 8)
                .number(8)
                .to_string(),
            "18446744073709551615"
        );
    }
}
