//! What the team tools' derived input schemas cannot read off a field's type: a field
//! parsed leniently but required of the model (a task id: a call without one gets its
//! own message, not serde's), and strings parsed by hand that take one of a few values
//! (a task status, a permission mode). Parsing stays where it was, so an invalid value
//! is still refused with the tool's own message; these only tell the model what to send.

use roo_agent::permissions::PermissionMode;
use roo_store::TaskStatus;
use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

/// The statuses a model may set or filter by.
pub(crate) const STATUSES: [TaskStatus; 3] = [
    TaskStatus::Pending,
    TaskStatus::InProgress,
    TaskStatus::Completed,
];

/// A task status: `pending`, `in_progress` or `completed`.
pub(crate) fn status(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "enum": STATUSES.map(TaskStatus::as_str)})
}

/// A permission mode by its canonical name.
pub(crate) fn permission_mode(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "enum": PermissionMode::ALL.map(PermissionMode::as_str)})
}

/// Lists `id` among the required fields.
pub(crate) fn id_required(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut() {
        require(object, "id");
    }
}

/// Lists `field` among the required fields of an object schema.
pub(crate) fn require(schema: &mut Map<String, Value>, field: &str) {
    let required = schema
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(names) = required
        && !names.iter().any(|n| n == field)
    {
        names.push(Value::String(field.to_string()));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn every_listed_status_parses_back() {
        for status in STATUSES {
            assert_eq!(TaskStatus::parse(status.as_str()), Some(status));
        }
    }

    #[test]
    fn require_adds_a_field_once() {
        let mut schema = json_schema!({"type": "object", "required": ["a"]});
        id_required(&mut schema);
        id_required(&mut schema);
        assert_eq!(
            schema.get("required").unwrap(),
            &serde_json::json!(["a", "id"])
        );
        let mut schema = json_schema!({"type": "object"});
        id_required(&mut schema);
        assert_eq!(schema.get("required").unwrap(), &serde_json::json!(["id"]));
    }
}
