//! int8 with one symmetric scale per token: `scale = max|x| / 127`, `code = round(x / scale)`
//! in −127..=127, decoded as `code · scale`. Each value is off by at most `scale / 2`.

/// Quantize one token into `codes` (`d` bytes, two's complement) and return its scale.
pub(crate) fn encode_token(x: &[f32], codes: &mut [u8]) -> f32 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 {
        codes.fill(0);
        return 0.0;
    }
    let scale = amax / 127.0;
    for (c, &v) in codes.iter_mut().zip(x) {
        *c = ((v / scale).round().clamp(-127.0, 127.0) as i8) as u8;
    }
    scale
}

/// Decode one token.
#[inline]
pub(crate) fn decode_token(codes: &[u8], scale: f32, out: &mut [f32]) {
    for (o, &c) in out.iter_mut().zip(codes) {
        *o = f32::from(c as i8) * scale;
    }
}
