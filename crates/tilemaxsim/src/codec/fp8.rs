//! fp8 e4m3 (the `e4m3fn` of CUDA and PyTorch: no infinities, 0x7F/0xFF are NaN, largest
//! finite 448) with one scale per token: `scale = max|x| / 448`, `code = e4m3(x / scale)`
//! rounded to nearest even (the `float8` crate's exact conversion), decoded as
//! `e4m3 → f32 · scale`. A value is off by at most 1/16 of its magnitude (3 mantissa bits),
//! or `2^-10 · scale` among the subnormals.

use float8::F8E4M3;

/// The largest finite e4m3 value.
pub const E4M3_MAX: f32 = 448.0;

/// Whether a code is one of e4m3fn's two NaN encodings.
#[inline]
pub(crate) fn is_nan(code: u8) -> bool {
    code & 0x7F == 0x7F
}

/// Quantize one token into `codes` (`d` bytes) and return its scale.
pub(crate) fn encode_token(x: &[f32], codes: &mut [u8]) -> f32 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 {
        codes.fill(0);
        return 0.0;
    }
    let scale = amax / E4M3_MAX;
    for (c, &v) in codes.iter_mut().zip(x) {
        // |v / scale| ≤ 448 up to one rounding; clamp so it never rounds past the largest finite.
        let y = (v / scale).clamp(-E4M3_MAX, E4M3_MAX);
        *c = F8E4M3::from_f32(y).to_bits();
    }
    scale
}

/// Decode one token (codes known not to be NaN, checked when the corpus was opened).
#[inline]
pub(crate) fn decode_token(codes: &[u8], scale: f32, out: &mut [f32], table: &[f32; 256]) {
    for (o, &c) in out.iter_mut().zip(codes) {
        *o = table[c as usize] * scale;
    }
}

/// Every e4m3 code's value (NaN for the two NaN codes).
pub(crate) fn table() -> [f32; 256] {
    let mut t = [0f32; 256];
    for (i, v) in t.iter_mut().enumerate() {
        *v = F8E4M3::from_bits(i as u8).to_f32();
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_layout() {
        let t = table();
        assert_eq!(t[0x7E], 448.0);
        assert_eq!(t[0xFE], -448.0);
        assert!(t[0x7F].is_nan() && t[0xFF].is_nan());
        assert_eq!(t[0x01], 2f32.powi(-9)); // smallest subnormal
        assert_eq!(t[0x38], 1.0);
        assert!(is_nan(0x7F) && is_nan(0xFF) && !is_nan(0x7E));
    }
}
