//! One offered tool, in no protocol's shape: what requests carry and
//! constraints and templates read.

use serde_json::{json, Value};

/// One offered tool: a function's name, what it is for, its parameters'
/// JSON Schema, and whether it asked for strict arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Value,
    pub strict: bool,
}

impl ToolSpec {
    /// As chat templates expect a tool (`{"type": "function", "function":
    /// {...}}`, the shape HF templates are written against).
    pub fn template_json(&self) -> Value {
        let mut f = json!({"name": self.name, "parameters": self.parameters});
        if let Some(d) = &self.description {
            f["description"] = d.clone().into();
        }
        json!({"type": "function", "function": f})
    }
}
