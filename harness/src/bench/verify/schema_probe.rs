//! Whether a server enforces a request's JSON schema, found with one
//! request before a run: its schema makes a fresh nonce a constant, which
//! no model writes by chance. Where the server keeps it, a share of a
//! run's requests carry such a schema by default, and a reply holding
//! another request's nonce (or no valid object) is caught whatever the
//! model's size.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::bench::request::{self, RequestSettings};
use crate::bench::sample::Sample;
use crate::bench::verify;
use crate::server::Target;

/// The share of requests that carry a nonce schema when the server
/// enforces schemas and the run names none.
pub const DEFAULT_SHARE: f64 = 0.25;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaProbe {
    pub enforced: bool,
    /// What the probe saw.
    pub detail: String,
}

/// Sends one request asking for a schema with a fresh nonce `const`.
pub async fn probe(target: &Target, settings: &RequestSettings, salt: &str) -> SchemaProbe {
    if !settings.endpoint.takes_schema() {
        return SchemaProbe {
            enforced: false,
            detail: format!(
                "--endpoint {} has no JSON schema request",
                settings.endpoint.name()
            ),
        };
    }
    let nonce = verify::marker(&format!("{salt}/schema-probe"), 0, 0);
    let messages = [json!({"role": "user", "content": "Describe your mood as a JSON object."})];
    let body = match request::body(
        settings,
        &messages,
        None,
        64,
        Some(&verify::schema_for(&nonce)),
    ) {
        Ok(b) => b,
        Err(e) => {
            return SchemaProbe {
                enforced: false,
                detail: e.to_string(),
            }
        }
    };
    let s = Sample::of(&target.post(settings.endpoint.path(), &body).await);
    if let Some(e) = &s.error {
        return SchemaProbe {
            enforced: false,
            detail: format!("the probe failed: {e}"),
        };
    }
    let kept = serde_json::from_str::<Value>(s.content.trim())
        .ok()
        .is_some_and(|v| v["tag"] == nonce.as_str());
    SchemaProbe {
        enforced: kept,
        detail: if kept {
            "the probe's reply kept its schema's nonce".into()
        } else {
            format!(
                "the probe's reply did not keep its schema's nonce: {:?}",
                s.content.chars().take(80).collect::<String>()
            )
        },
    }
}
