//! Permalinks: the view state (cursor, filters, lanes, viewport, consumer) and the trace's
//! origin (demo, same-origin URL, or the whole trace inlined as deflate + base64url) encoded in
//! the URL hash, e.g. `#c=12&r=child-before-parent-in-job&v=0,0.05&u=/trace`. Pure functions.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use crate::model::LaneMode;

/// Traces whose compressed form is at most this many bytes are inlined in permalinks.
pub const INLINE_LIMIT: usize = 24 * 1024;

/// Where the trace of a permalink comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceOrigin {
    /// The built-in demo.
    Demo,
    /// A same-origin URL.
    Url(String),
    /// The trace bytes, inlined (deflate + base64url in the link).
    Inline(Vec<u8>),
    /// Not reproducible from the link (a large local file).
    Local,
}

/// Everything a permalink restores.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkState {
    /// Cursor (event index).
    pub cursor: Option<u32>,
    /// Violation rule filter.
    pub rule: Option<String>,
    /// Search query.
    pub query: Option<String>,
    /// Selected consumer.
    pub consumer: Option<String>,
    /// Lane layout (`l=source`, `l=job`; absent: per tier).
    pub lanes: LaneMode,
    /// Viewport: (first event at the left edge, events per pixel).
    pub viewport: Option<(f64, f64)>,
    /// Trace origin (`None`: not given).
    pub origin: Option<TraceOrigin>,
}

/// Percent-encode everything outside unreserved characters (and `/`, `:`).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn dec(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes.get(i), bytes.get(i + 1..i + 3)) {
            (Some(b'%'), Some(h)) => match std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(v) => {
                    out.push(v);
                    i += 3;
                }
                None => {
                    out.push(b'%');
                    i += 1;
                }
            },
            (Some(b), _) => {
                out.push(*b);
                i += 1;
            }
            (None, _) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Compress trace bytes for inlining; `None` when the result exceeds [`INLINE_LIMIT`].
/// Stops compressing as soon as the output outgrows the limit, so a large trace costs only the
/// first few hundred KB of deflate work (not a level-9 pass over the whole file).
pub fn inline_trace(bytes: &[u8]) -> Option<String> {
    use miniz_oxide::deflate::core::{
        compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
    };
    // Same stream as `miniz_oxide::deflate::compress_to_vec(bytes, 9)` (raw deflate).
    let mut c = CompressorOxide::new(create_comp_flags_from_zip_params(9, 0, 0));
    // The base64url text must fit INLINE_LIMIT * 4 / 3 + 4 characters.
    let max_packed = (INLINE_LIMIT * 4 / 3 + 4) * 3 / 4;
    let mut out = vec![0u8; max_packed + 1];
    let mut input = bytes;
    let mut pos = 0;
    loop {
        let (status, used, written) = compress(
            &mut c,
            input,
            out.get_mut(pos..).unwrap_or_default(),
            TDEFLFlush::Finish,
        );
        pos += written;
        input = input.get(used..).unwrap_or_default();
        match status {
            TDEFLStatus::Done => break,
            TDEFLStatus::Okay if pos < out.len() && (used > 0 || written > 0) => continue,
            _ => return None, // output full (too large) or a compressor error
        }
    }
    out.truncate(pos);
    let s = URL_SAFE_NO_PAD.encode(out);
    (s.len() <= INLINE_LIMIT * 4 / 3 + 4).then_some(s)
}

/// Inverse of [`inline_trace`]; errors are readable sentences.
pub fn uninline_trace(s: &str) -> Result<Vec<u8>, String> {
    let packed = URL_SAFE_NO_PAD
        .decode(s.as_bytes())
        .map_err(|e| format!("the link's inline trace is not base64url: {e}"))?;
    miniz_oxide::inflate::decompress_to_vec_with_limit(&packed, 64 << 20)
        .map_err(|e| format!("the link's inline trace does not inflate: {e:?}"))
}

impl LinkState {
    /// Encode as a URL hash (without the leading `#`).
    pub fn to_hash(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = self.cursor {
            parts.push(format!("c={c}"));
        }
        if let Some(r) = &self.rule {
            parts.push(format!("r={}", enc(r)));
        }
        if let Some(q) = self.query.as_ref().filter(|q| !q.is_empty()) {
            parts.push(format!("q={}", enc(q)));
        }
        if let Some(k) = &self.consumer {
            parts.push(format!("k={}", enc(k)));
        }
        if self.lanes != LaneMode::Tier {
            parts.push(format!("l={}", self.lanes.as_str()));
        }
        if let Some((s, p)) = self.viewport {
            parts.push(format!("v={},{}", crate::fixed(s, 1), crate::fixed(p, 4)));
        }
        match &self.origin {
            Some(TraceOrigin::Demo) => parts.push("d=1".into()),
            Some(TraceOrigin::Url(u)) => parts.push(format!("u={}", enc(u))),
            Some(TraceOrigin::Inline(b)) => {
                if let Some(s) = inline_trace(b) {
                    parts.push(format!("t={s}"));
                }
            }
            Some(TraceOrigin::Local) | None => {}
        }
        parts.join("&")
    }

    /// Decode a URL hash (with or without `#`). Unknown keys are ignored; an inline trace that
    /// does not decode is an error.
    pub fn from_hash(hash: &str) -> Result<LinkState, String> {
        let mut st = LinkState::default();
        for part in hash
            .trim_start_matches('#')
            .split('&')
            .filter(|p| !p.is_empty())
        {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            match k {
                "c" => st.cursor = v.parse().ok(),
                "r" => st.rule = Some(dec(v)),
                "q" => st.query = Some(dec(v)),
                "k" => st.consumer = Some(dec(v)),
                "l" => st.lanes = LaneMode::parse(v),
                "v" => {
                    st.viewport = v
                        .split_once(',')
                        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                        .filter(|(a, b): &(f64, f64)| a.is_finite() && b.is_finite() && *b > 0.0)
                }
                "d" => st.origin = Some(TraceOrigin::Demo),
                "u" => st.origin = Some(TraceOrigin::Url(dec(v))),
                "t" => st.origin = Some(TraceOrigin::Inline(uninline_trace(v)?)),
                _ => {}
            }
        }
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let st = LinkState {
            cursor: Some(42),
            rule: Some("child-before-parent-in-job".into()),
            query: Some("tier=CPU && job=3".into()),
            consumer: Some("llmd".into()),
            lanes: LaneMode::SourceTier,
            viewport: Some((10.0, 0.125)),
            origin: Some(TraceOrigin::Inline(b"{\"kvscope\":1}\n".to_vec())),
        };
        let h = st.to_hash();
        assert!(
            !h.contains(' ') && !h.contains('&') || h.split('&').count() == 7,
            "{h}"
        );
        assert_eq!(LinkState::from_hash(&format!("#{h}")).unwrap(), st);
    }

    #[test]
    fn url_origin_and_garbage() {
        let st = LinkState {
            origin: Some(TraceOrigin::Url("/trace?x=1&y=2".into())),
            ..Default::default()
        };
        assert_eq!(LinkState::from_hash(&st.to_hash()).unwrap(), st);
        assert!(LinkState::from_hash("t=!!!").is_err());
        let jobs = LinkState {
            lanes: LaneMode::TierJob,
            ..Default::default()
        };
        assert_eq!(jobs.to_hash(), "l=job");
        assert_eq!(LinkState::from_hash("#l=job").unwrap(), jobs);
        assert_eq!(
            LinkState::from_hash("l=nosuch").unwrap(),
            LinkState::default()
        );
        assert_eq!(
            LinkState::from_hash("c=abc&zz=1").unwrap(),
            LinkState::default()
        );
    }

    #[test]
    fn large_traces_are_not_inlined() {
        let big: Vec<u8> = (0..400_000u32)
            .flat_map(|i| i.wrapping_mul(2654435761).to_le_bytes())
            .collect();
        assert!(inline_trace(&big).is_none());
        assert!(inline_trace(b"small").is_some());
    }
}

#[cfg(test)]
mod inline_tests {
    use super::*;

    /// The bounded compressor gives exactly what a full `compress_to_vec` gives, and decides
    /// near the limit the same way.
    #[test]
    fn same_stream_as_compress_to_vec() {
        let demo = crate::DEMO_TRACE.as_bytes();
        let full = URL_SAFE_NO_PAD.encode(miniz_oxide::deflate::compress_to_vec(demo, 9));
        assert_eq!(inline_trace(demo).as_deref(), Some(full.as_str()));
        assert_eq!(uninline_trace(&full).unwrap(), demo);
        // Around the limit: pseudo-random bytes barely compress.
        let mut x = 1u64;
        for n in [INLINE_LIMIT - 64, INLINE_LIMIT, INLINE_LIMIT + 64] {
            let bytes: Vec<u8> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let s = URL_SAFE_NO_PAD.encode(miniz_oxide::deflate::compress_to_vec(&bytes, 9));
            let expect = (s.len() <= INLINE_LIMIT * 4 / 3 + 4).then_some(s);
            assert_eq!(inline_trace(&bytes), expect, "n = {n}");
        }
    }
}
