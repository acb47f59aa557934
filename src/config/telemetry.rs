//! `discovery.telemetry`: OpenTelemetry traces, as written in the config (off unless
//! `endpoint` is set). `crate::telemetry` starts the spans and exports them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The service name spans carry when the config names none.
pub const DEFAULT_SERVICE_NAME: &str = "anygpt-discovery";

/// `discovery.telemetry`: OpenTelemetry traces over OTLP/HTTP JSON, off unless `endpoint` is
/// set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct TelemetrySpec {
    /// The OTLP/HTTP collector's base URL (`http://otel-collector:4318`): spans are sent as
    /// JSON (`POST`) to `{endpoint}/v1/traces` (a URL already ending in `/v1/traces` is used as it is).
    /// Without it no span is made and no `traceparent` is sent downstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `service.name` of the spans (default `anygpt-discovery`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Share of new traces recorded, from 0 to 1 (default 1). A request that arrives with a
    /// `traceparent` follows its caller's sampling decision instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_ratio: Option<f64>,
    /// Sent to the collector with every export (`Authorization`, an API key header). Values
    /// may reference `${ENV_VAR}` or `${secret:NAME}` (stored with `anygpt-discovery secret
    /// set NAME`); kept out of every log and of `config show`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

impl TelemetrySpec {
    /// Whether traces are on.
    #[must_use]
    pub fn is_on(&self) -> bool {
        self.endpoint.is_some()
    }

    #[must_use]
    pub fn sampling_ratio(&self) -> f64 {
        self.sampling_ratio.unwrap_or(1.0)
    }

    #[must_use]
    pub fn service_name(&self) -> &str {
        self.service_name.as_deref().unwrap_or(DEFAULT_SERVICE_NAME)
    }

    /// Checks serde cannot express, each as `(path, reason)`.
    pub(super) fn check(&self) -> Result<(), (String, String)> {
        const AT: &str = "discovery.telemetry";
        if let Some(endpoint) = &self.endpoint {
            let path = format!("{AT}.endpoint");
            super::expand::check(endpoint).map_err(|e| (path.clone(), e.to_string()))?;
            // A reference is checked when it is expanded, at start.
            if !endpoint.contains("${") {
                let url = reqwest::Url::parse(endpoint).map_err(|e| {
                    (
                        path.clone(),
                        format!(
                            "not a URL ({e}): write the collector's OTLP/HTTP address, e.g. `http://localhost:4318`"
                        ),
                    )
                })?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err((path, "must be an http:// or https:// URL (OTLP/HTTP)".to_owned()));
                }
            }
        }
        if let Some(ratio) = self.sampling_ratio {
            if !(0.0..=1.0).contains(&ratio) {
                return Err((
                    format!("{AT}.samplingRatio"),
                    format!("must be from 0 to 1 (the share of new traces recorded); got {ratio}"),
                ));
            }
        }
        if let Some(name) = &self.service_name {
            if name.trim().is_empty() || name.chars().count() > 200 {
                return Err((
                    format!("{AT}.serviceName"),
                    "must be a name of 1 to 200 characters".to_owned(),
                ));
            }
        }
        for (name, value) in &self.headers {
            let path = format!("{AT}.headers.{name}");
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err((path, "is not a valid HTTP header name".to_owned()));
            }
            super::expand::check(value).map_err(|e| (path, e.to_string()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: serde_json::Value) -> TelemetrySpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert!(!TelemetrySpec::default().is_on());
        let on = spec(serde_json::json!({ "endpoint": "http://127.0.0.1:4318" }));
        assert!(on.is_on());
        assert!((on.sampling_ratio() - 1.0).abs() < f64::EPSILON);
        assert_eq!(on.service_name(), "anygpt-discovery");
        on.check().unwrap();
    }

    #[test]
    fn bad_settings_name_their_place() {
        let cases = [
            (
                serde_json::json!({ "endpoint": "localhost:4318" }),
                "discovery.telemetry.endpoint",
            ),
            (
                serde_json::json!({ "endpoint": "ftp://x" }),
                "discovery.telemetry.endpoint",
            ),
            (
                serde_json::json!({ "samplingRatio": 1.5 }),
                "discovery.telemetry.samplingRatio",
            ),
            (
                serde_json::json!({ "serviceName": " " }),
                "discovery.telemetry.serviceName",
            ),
            (
                serde_json::json!({ "headers": { "bad name": "x" } }),
                "discovery.telemetry.headers.bad name",
            ),
            (
                serde_json::json!({ "headers": { "x-key": "${UNCLOSED" } }),
                "discovery.telemetry.headers.x-key",
            ),
        ];
        for (value, path) in cases {
            let (at, reason) = spec(value.clone()).check().unwrap_err();
            assert_eq!(at, path, "{value}: {reason}");
        }
        // A reference is left for the start to expand.
        spec(serde_json::json!({ "endpoint": "${OTEL_EXPORTER_OTLP_ENDPOINT}" }))
            .check()
            .unwrap();
    }
}
