//! Retry policy for transient failures: exponential backoff with jitter, and the
//! server's own `retry-after` when it sends one.
//!
//! Kept apart from the transport so the arithmetic is unit-tested without a network and
//! the policy can be configured (`retries:` in config.yaml) and shortened in tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;

/// How often and how patiently to retry a request that failed transiently (connect
/// error, 408/409/429/5xx, Anthropic 529 "overloaded", a stream that broke before its
/// first event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
    /// Delay before the first retry when the server gives no `retry-after`; doubles
    /// with every further retry.
    pub base_delay: Duration,
    /// Upper bound of the computed backoff delay.
    pub max_delay: Duration,
    /// Longest `retry-after` we are willing to wait; a server asking for more gets the
    /// error reported instead of a silent long stall.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 5,
            base_delay: Duration::from_millis(1000),
            max_delay: Duration::from_secs(32),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// Backoff before retry number `retry` (0-based) when the server said nothing:
    /// `base * 2^retry`, capped at `max_delay`, with "equal jitter" (a random point in
    /// the upper half) so that a team of agents hitting a rate limit together does not
    /// retry in lockstep.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32.checked_shl(retry.min(20)).unwrap_or(u32::MAX));
        let capped = exp.min(self.max_delay);
        capped.mul_f64(0.5 + 0.5 * random_fraction())
    }
}

/// The delay a server asked for: `retry-after-ms` (OpenAI) or `retry-after` in seconds
/// (both providers). HTTP-date values are not used by either API and fall back to the
/// computed backoff.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return finite_duration(ms / 1000.0);
    }
    text("retry-after")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(finite_duration)
}

/// The server's explicit verdict on retrying (`x-should-retry: true|false`), which both
/// providers' official SDKs honour over their own status-code rules.
pub fn should_retry_header(headers: &HeaderMap) -> Option<bool> {
    match headers.get("x-should-retry")?.to_str().ok()?.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

fn finite_duration(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// A number in [0, 1) from splitmix64 over the clock and a counter: good enough for
/// jitter, and not worth a dependency.
fn random_fraction() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut z = nanos
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn backoff_doubles_within_jitter_and_caps() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            ..RetryPolicy::default()
        };
        for retry in 0..8 {
            let full = Duration::from_millis(100 * (1 << retry)).min(Duration::from_millis(1000));
            let d = policy.backoff(retry);
            assert!(
                d >= full / 2 && d <= full,
                "retry {retry}: {d:?} vs {full:?}"
            );
        }
        assert!(policy.backoff(u32::MAX) <= Duration::from_millis(1000));
    }

    #[test]
    fn retry_after_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), None);
        h.insert("x-should-retry", HeaderValue::from_static("false"));
        assert_eq!(should_retry_header(&h), Some(false));
    }
}
