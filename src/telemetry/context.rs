//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>): `traceparent` and `tracestate`
//! read strictly from what a client sent, and written for a downstream server.
//!
//! A value that breaks the format is ignored as a whole (the request starts a fresh trace);
//! nothing a client sent is echoed unless it parsed, and then only in its canonical form.

/// Most `tracestate` list members kept (the W3C limit).
const MAX_TRACESTATE_MEMBERS: usize = 32;
/// Longest `tracestate` kept; a longer one is dropped (the spec lets a vendor truncate, but a
/// partial list would misstate the caller's).
const MAX_TRACESTATE_CHARS: usize = 512;

/// A trace's id: 16 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span's id: 8 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    /// A fresh random id.
    #[must_use]
    pub fn random() -> Self {
        let mut bytes = [0; 16];
        fill_random(&mut bytes);
        Self(bytes)
    }

    #[must_use]
    pub fn hex(&self) -> String {
        hex(&self.0)
    }

    /// The id's last 8 bytes, the random part the ratio sampler compares (as OpenTelemetry's
    /// `TraceIdRatioBased` does), so every service decides the same for one trace.
    #[must_use]
    pub fn low(&self) -> u64 {
        let mut low = [0; 8];
        low.copy_from_slice(&self.0[8..]);
        u64::from_be_bytes(low)
    }
}

impl SpanId {
    /// A fresh random id.
    #[must_use]
    pub fn random() -> Self {
        let mut bytes = [0; 8];
        fill_random(&mut bytes);
        Self(bytes)
    }

    #[must_use]
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

/// Where a span sits in its trace: what `traceparent` carries, and `tracestate` beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    /// The `sampled` flag: the trace is being recorded.
    pub sampled: bool,
    /// The caller's `tracestate`, validated and re-joined; passed on unchanged.
    pub trace_state: Option<String>,
}

impl SpanContext {
    /// The context a client sent, or `None` when `traceparent` is not a valid one. A
    /// malformed `tracestate` is dropped alone (the spec's rule), keeping the parent.
    #[must_use]
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let (trace_id, span_id, flags) = parse_traceparent(traceparent)?;
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
            trace_state: tracestate.and_then(parse_tracestate),
        })
    }

    /// The `traceparent` value naming this span as the parent (version 00).
    #[must_use]
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{}",
            self.trace_id.hex(),
            self.span_id.hex(),
            if self.sampled { "01" } else { "00" }
        )
    }
}

/// `version-traceid-parentid-flags`, by the rules of the spec's version 00 and its rules for
/// reading a later version (more fields may follow after a `-`).
fn parse_traceparent(text: &str) -> Option<(TraceId, SpanId, u8)> {
    let text = text.trim_matches([' ', '\t']);
    let bytes = text.as_bytes();
    // ASCII only, so the slices below fall on character boundaries.
    if bytes.len() < 55 || !text.is_ascii() {
        return None;
    }
    let version = lower_hex::<1>(&text[0..2])?[0];
    if version == 0xff || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    // Version 00 is exactly 55 characters; a later one may add fields after a dash.
    if (version == 0 && bytes.len() != 55) || (bytes.len() > 55 && bytes[55] != b'-') {
        return None;
    }
    let trace_id = lower_hex::<16>(&text[3..35])?;
    let span_id = lower_hex::<8>(&text[36..52])?;
    let flags = lower_hex::<1>(&text[53..55])?[0];
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some((TraceId(trace_id), SpanId(span_id), flags))
}

/// `N` bytes from exactly `2N` lowercase hex digits (uppercase is invalid in Trace Context).
fn lower_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0; N];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

/// A `tracestate` list, checked member by member and re-joined; `None` when any member breaks
/// the format, when it has too many members or is too long, or when it is empty.
fn parse_tracestate(text: &str) -> Option<String> {
    if text.len() > MAX_TRACESTATE_CHARS {
        return None;
    }
    let mut members = Vec::new();
    for member in text.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let (key, value) = member.split_once('=')?;
        if !valid_key(key) || !valid_value(value) {
            return None;
        }
        members.push(member);
    }
    if members.is_empty() || members.len() > MAX_TRACESTATE_MEMBERS {
        return None;
    }
    Some(members.join(","))
}

/// `simple-key` or `tenant@system`, lowercase.
fn valid_key(key: &str) -> bool {
    let part = |text: &str, max: usize| {
        let b = text.as_bytes();
        !b.is_empty()
            && b.len() <= max
            && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-' | b'*' | b'/'))
    };
    match key.split_once('@') {
        Some((tenant, system)) => part(tenant, 241) && part(system, 14),
        None => part(key, 256),
    }
}

/// Printable ASCII without `,` and `=`, not ending in a space, 1 to 256 characters.
fn valid_value(value: &str) -> bool {
    let b = value.as_bytes();
    !b.is_empty()
        && b.len() <= 256
        && !value.ends_with(' ')
        && b.iter().all(|c| (0x20..=0x7e).contains(c) && *c != b',' && *c != b'=')
}

use crate::hash::hex;

/// Random bytes for an id, never all zero. The system's random source; should it fail, a
/// hash of the time and a counter keeps ids unique within the process.
fn fill_random(bytes: &mut [u8]) {
    use ring::rand::SecureRandom as _;
    if ring::rand::SystemRandom::new().fill(bytes).is_err() || bytes.iter().all(|b| *b == 0) {
        use std::hash::{BuildHasher as _, Hasher as _};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(1);
        for chunk in bytes.chunks_mut(8) {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
            hasher.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos(),
            );
            let value = hasher.finish() | 1;
            chunk.copy_from_slice(&value.to_be_bytes()[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_valid_traceparent_is_read_and_written_back_the_same() {
        let context = SpanContext::parse(VALID, None).unwrap();
        assert_eq!(context.trace_id.hex(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(context.span_id.hex(), "b7ad6b7169203331");
        assert!(context.sampled);
        assert_eq!(context.traceparent(), VALID);
        let unsampled = SpanContext::parse(&VALID.replace("-01", "-00"), None).unwrap();
        assert!(!unsampled.sampled);
        // Other flags than `sampled` are not passed on: only version 00's flag is known.
        let other_flags = SpanContext::parse(&VALID.replace("-01", "-03"), None).unwrap();
        assert!(other_flags.sampled);
        assert!(other_flags.traceparent().ends_with("-01"));
        // Optional whitespace around a header value.
        assert!(SpanContext::parse(&format!(" {VALID}\t"), None).is_some());
    }

    #[test]
    fn malformed_traceparents_are_refused() {
        let bad = [
            "",
            "00",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            // uppercase hex
            "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
            // all-zero ids
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            // version ff is invalid
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            // version 00 has nothing after the flags
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",
            // wrong separators and lengths
            "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
            "00-0af7651916cd43dd8448eb211c80319-cb7ad6b7169203331-01",
            "0-00af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c8031zz-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333g-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
            // a multi-byte character where a digit belongs
            "00-0af7651916cd43dd8448eb211c8031é-b7ad6b7169203331-01",
        ];
        for text in bad {
            assert!(SpanContext::parse(text, None).is_none(), "{text:?} was accepted");
        }
    }

    #[test]
    fn a_later_version_is_read_for_the_fields_it_shares() {
        let later = "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-the-future-adds";
        let context = SpanContext::parse(later, None).unwrap();
        assert_eq!(context.traceparent(), VALID);
        assert!(SpanContext::parse("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x", None).is_none());
    }

    #[test]
    fn tracestate_is_kept_when_valid_and_dropped_alone_when_not() {
        let context = SpanContext::parse(VALID, Some("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE,,")).unwrap();
        assert_eq!(
            context.trace_state.as_deref(),
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        );
        let tenant = SpanContext::parse(VALID, Some("acme@vendor=x1")).unwrap();
        assert_eq!(tenant.trace_state.as_deref(), Some("acme@vendor=x1"));
        for bad in [
            "Rojo=1",
            "rojo",
            "rojo=a,b",
            "=x",
            "rojo=a=b",
            "rojo=x\ty",
            "",
            ",",
            "r\u{e9}=1",
        ] {
            let context = SpanContext::parse(VALID, Some(bad)).unwrap();
            assert_eq!(context.trace_state, None, "{bad:?} was kept");
        }
        let many = (0..33).map(|i| format!("k{i}=v")).collect::<Vec<_>>().join(",");
        assert_eq!(SpanContext::parse(VALID, Some(&many)).unwrap().trace_state, None);
        let long = format!("k={}", "v".repeat(600));
        assert_eq!(SpanContext::parse(VALID, Some(&long)).unwrap().trace_state, None);
    }

    #[test]
    fn fresh_ids_differ_and_are_never_zero() {
        let (a, b) = (TraceId::random(), TraceId::random());
        assert_ne!(a, b);
        assert_ne!(a.0, [0; 16]);
        assert_ne!(SpanId::random().0, [0; 8]);
        assert_eq!(a.hex().len(), 32);
    }
}
