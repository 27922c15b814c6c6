//! Standard base64 with padding (RFC 4648, section 4): JSON Lines' `raw` field, the exact
//! payload bytes of a raw capture, written by the JSON writer and read by the reader.
//!
//! Hand-written rather than the base64 crate's engine, which the tests compare these functions
//! with: that engine's unrolled encode and decode loops were 2,353 B gzip of the lean npm
//! package (1,077 B encoding, 1,276 B decoding: `wasm/README.md`, "Size"), for the rare raw
//! captures. Decoding follows the crate's `STANDARD` engine exactly,
//! errors included: canonical padding is required, non-zero trailing bits are rejected, and a
//! [`DecodeError`] has the crate's offsets and messages.

use std::fmt;

/// The 64 digits.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Not a digit (in [`DIGIT_VALUES`]).
const INVALID: u8 = 0xff;

/// Each byte's digit value, or [`INVALID`] (`=` included: padding is handled apart).
const DIGIT_VALUES: [u8; 256] = {
    let mut t = [INVALID; 256];
    let mut i = 0;
    while i < 64 {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// The length of the base64 text of `n` bytes.
pub(crate) fn encoded_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// Write the base64 text of `bytes` into `out`, which is [`encoded_len`] bytes long.
pub(crate) fn encode_into(bytes: &[u8], out: &mut [u8]) {
    // Each 3 bytes (the last group zero-padded) as four 6-bit digits; `=` for the digits that
    // only padding fills.
    for (digits, chunk) in out.chunks_exact_mut(4).zip(bytes.chunks(3)) {
        let mut group = [0u8; 4];
        for (g, b) in group.iter_mut().skip(1).zip(chunk) {
            *g = *b;
        }
        let n = u32::from_be_bytes(group);
        for (k, d) in digits.iter_mut().enumerate() {
            *d = if k <= chunk.len() {
                ALPHABET[(n >> (18 - 6 * k)) as usize & 63]
            } else {
                b'='
            };
        }
    }
}

/// Why base64 text does not decode (the base64 crate's `DecodeError`: `InvalidByte`,
/// `InvalidLength`, `InvalidLastSymbol`, `InvalidPadding`, with the same messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// A byte that is not a digit (or padding where it cannot be), at an offset.
    Symbol(usize, u8),
    /// A length no padding could make whole (one digit in the last group).
    Length(usize),
    /// The last digit, at an offset, has bits set that no byte holds.
    LastSymbol(usize, u8),
    /// Missing or extra padding.
    Padding,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::Symbol(at, b) => write!(f, "Invalid symbol {b}, offset {at}."),
            DecodeError::Length(len) => write!(f, "Invalid input length: {len}"),
            DecodeError::LastSymbol(at, b) => {
                write!(f, "Invalid last symbol {b}, offset {at}.")
            }
            DecodeError::Padding => f.write_str("Invalid padding"),
        }
    }
}

/// The bytes of base64 text `input`.
pub(crate) fn decode(input: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let digit = |at: usize, b: u8| match DIGIT_VALUES[usize::from(b)] {
        INVALID => Err(DecodeError::Symbol(at, b)),
        v => Ok(u32::from(v)),
    };
    let rem = input.len() % 4;
    // A lone last digit is checked first (as the crate does).
    if let (1, Some(&last)) = (rem, input.last()) {
        if last != b'=' {
            digit(input.len() - 1, last)?;
        }
    }
    // Whole groups of four digits, all but the last group (padding can only end the text).
    let body = input
        .len()
        .saturating_sub(rem)
        .saturating_sub(if rem == 0 { 4 } else { 0 });
    let (groups, last) = input.split_at(body);
    let mut out = Vec::with_capacity(input.len() / 4 * 3 + 3);
    for (g, group) in groups.chunks_exact(4).enumerate() {
        let mut n = 0u32;
        for (k, &b) in group.iter().enumerate() {
            n = (n << 6) | digit(g * 4 + k, b)?;
        }
        out.extend_from_slice(&n.to_be_bytes()[1..]);
    }
    // The last 1 to 4 bytes: digits, then padding.
    let (mut digits, mut pads, mut first_pad, mut last_digit) = (0usize, 0usize, 0usize, 0u8);
    let mut n = 0u32;
    for (i, &b) in last.iter().enumerate() {
        if b == b'=' {
            if i < 2 {
                return Err(DecodeError::Symbol(body + i, b));
            }
            if pads == 0 {
                first_pad = i;
            }
            pads += 1;
            continue;
        }
        if pads > 0 {
            return Err(DecodeError::Symbol(body + first_pad, b'='));
        }
        last_digit = b;
        n |= digit(body + i, b)? << (26 - 6 * digits);
        digits += 1;
    }
    if !input.is_empty() && digits < 2 {
        return Err(DecodeError::Length(body + digits));
    }
    if (pads + digits) % 4 != 0 {
        return Err(DecodeError::Padding);
    }
    let bytes = digits * 6 / 8;
    if n & (!0u32 >> (bytes * 8)) != 0 {
        return Err(DecodeError::LastSymbol(body + digits - 1, last_digit));
    }
    out.extend_from_slice(n.to_be_bytes().get(..bytes).unwrap_or_default());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use ::base64::Engine as _;
    use rand::{Rng, SeedableRng};

    /// Every padding case, the empty input and every byte value, against base64's `encode`.
    #[test]
    fn encoding_matches_the_base64_crate() {
        for n in (0..8).chain([255, 256, 257, 300]) {
            let bytes: Vec<u8> = (0..n).map(|i| 0xf0 ^ (i * 37) as u8).collect();
            let mut text = vec![0; super::encoded_len(bytes.len())];
            super::encode_into(&bytes, &mut text);
            let want = ::base64::engine::general_purpose::STANDARD.encode(&bytes);
            assert_eq!(String::from_utf8(text).unwrap(), want);
        }
    }

    /// Random texts of digits, padding and other bytes (most of them malformed somewhere),
    /// and the encodings of random bytes: the same bytes or the same error message as the
    /// crate's `STANDARD` engine.
    #[test]
    fn decoding_matches_the_base64_crate() {
        let engine = ::base64::engine::general_purpose::STANDARD;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(18);
        let symbols = b"AQgw/+=9z!\n";
        for round in 0..200_000 {
            let text: Vec<u8> = if round % 4 == 0 {
                let bytes: Vec<u8> = (0..rng.gen_range(0..12)).map(|_| rng.gen()).collect();
                engine.encode(bytes).into_bytes()
            } else {
                (0..rng.gen_range(0..14))
                    .map(|_| symbols[rng.gen_range(0..symbols.len())])
                    .collect()
            };
            let ours = super::decode(&text).map_err(|e| e.to_string());
            let theirs = engine.decode(&text).map_err(|e| e.to_string());
            assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(&text));
        }
    }
}
