//! `discovery.rateLimits`: how many tool calls a caller, and a downstream server, may take a
//! second (token buckets; `crate::engine` keeps them in the store, shared by replicas).

use serde::{Deserialize, Serialize};

/// Highest rate accepted: beyond it a limit limits nothing.
const MAX_PER_SECOND: f64 = 100_000.0;

/// `discovery.rateLimits`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct RateLimitsSpec {
    /// Each caller's calls (`execute_tool` and tools shown directly), all servers together: a
    /// user of the team endpoint (issuer and subject), or the local user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_caller: Option<RateSpec>,
    /// Each downstream server's calls, all callers together (what the server, or the API
    /// behind it, can take).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_server: Option<RateSpec>,
}

/// One token bucket: refilled at `callsPerSecond`, holding at most `burst` calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct RateSpec {
    /// Calls a second, on average (fractions allowed: 0.5 is one call every 2 s).
    pub calls_per_second: f64,
    /// Calls that may come at once after a quiet time (default: `callsPerSecond` rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

impl RateSpec {
    #[must_use]
    pub fn burst(&self) -> u32 {
        self.burst.unwrap_or_else(|| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked to 1..=100000"
            )]
            let rounded = self.calls_per_second.ceil().max(1.0) as u32;
            rounded
        })
    }

    /// How a refusal describes this limit: `<whose> may make N calls a second (bursts of B)`.
    #[must_use]
    pub fn describe(&self, whose: &str) -> String {
        format!(
            "{whose} may make {} calls a second (bursts of {})",
            self.calls_per_second,
            self.burst()
        )
    }

    fn check(&self, at: &str) -> Result<(), (String, String)> {
        let rate = self.calls_per_second;
        if !(rate > 0.0 && rate <= MAX_PER_SECOND) {
            return Err((
                format!("{at}.callsPerSecond"),
                format!("must be more than 0 and at most {MAX_PER_SECOND}; got {rate}"),
            ));
        }
        if self.burst == Some(0) {
            return Err((format!("{at}.burst"), "must be at least 1 (one call)".to_owned()));
        }
        Ok(())
    }
}

impl RateLimitsSpec {
    pub(super) fn check(&self) -> Result<(), (String, String)> {
        if let Some(rate) = &self.per_caller {
            rate.check("discovery.rateLimits.perCaller")?;
        }
        if let Some(rate) = &self.per_server {
            rate.check("discovery.rateLimits.perServer")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked_where_they_are_written() {
        let spec: RateLimitsSpec =
            serde_json::from_value(serde_json::json!({ "perCaller": { "callsPerSecond": 0.5 } })).unwrap();
        spec.check().unwrap();
        assert_eq!(spec.per_caller.as_ref().unwrap().burst(), 1);
        let zero: RateLimitsSpec =
            serde_json::from_value(serde_json::json!({ "perServer": { "callsPerSecond": 0 } })).unwrap();
        let (path, reason) = zero.check().unwrap_err();
        assert_eq!(path, "discovery.rateLimits.perServer.callsPerSecond");
        assert!(reason.contains("more than 0"), "{reason}");
        let burst: RateLimitsSpec =
            serde_json::from_value(serde_json::json!({ "perCaller": { "callsPerSecond": 2, "burst": 0 } })).unwrap();
        assert_eq!(burst.check().unwrap_err().0, "discovery.rateLimits.perCaller.burst");
    }
}
