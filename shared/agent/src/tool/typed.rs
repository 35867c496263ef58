//! Typed tools: a struct, an input type and one async fn.
//!
//! A [`TypedTool`] names its input struct; the JSON Schema the model reads is derived
//! from it (`schemars`: doc comments become descriptions, `#[serde(default)]` and
//! `Option` make a field optional, `#[schemars(range(min = 1))]` bounds a number), and
//! the input is parsed into it before [`TypedTool::run`] is called — an input that does
//! not parse is an error result naming the tool, as for every built-in tool. Every
//! `TypedTool` is a [`Tool`] through a blanket impl, so the registry, the permission
//! layers and the hook point see no difference.
//!
//! The derived schema is tidied for models: no `$schema` or `title`, no integer
//! `format`s, an optional field is its type (not `[type, "null"]`, and no `null` in its
//! `enum`: models omit a field rather than send null), no `default` that is empty or
//! false (what a model assumes of a field it leaves out), no top-level `description`
//! (the input struct's doc comment is for Rust readers; the tool's description is what
//! the model reads), no `additionalProperties: true` (the default), and the top level
//! has `properties` (even none: some OpenAI-compatible servers insist) and
//! `additionalProperties: false`.
//! Whether unknown fields are *refused* is the input struct's choice
//! (`#[serde(deny_unknown_fields)]`), as before.

use std::future::Future;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};

/// A tool with a typed input. Implement this instead of [`Tool`].
pub trait TypedTool: Send + Sync {
    /// What the model sends; its schema is derived.
    type Input: DeserializeOwned + JsonSchema + Send;

    /// Name the model calls it by.
    const NAME: &'static str;

    /// Description sent to the model.
    fn description(&self) -> String;

    /// Effect class for the permission mode layer.
    fn kind(&self) -> ToolKind;

    /// Whether this call may run at the same time as other concurrency-safe calls.
    /// Judged on the input as sent, before it is parsed.
    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    /// What this call touches, for permission checks: judged on the input as the
    /// model sent it (the check must see what was asked, even if it does not parse).
    fn permission_target(&self, _input: &Value) -> PermissionTarget {
        PermissionTarget::None
    }

    /// One-line summary for UIs; `None`: the default (`Name(target)`).
    fn summarize(&self, _input: &Value) -> Option<String> {
        None
    }

    /// See [`Tool::requires_interaction`].
    fn requires_interaction(&self) -> bool {
        false
    }

    /// See [`Tool::needs_conversation`].
    fn needs_conversation(&self) -> bool {
        false
    }

    /// See [`Tool::delegation`].
    fn delegation(&self) -> super::Delegation {
        super::Delegation::AnyAgent
    }

    /// See [`Tool::manages_sub_agents`].
    fn manages_sub_agents(&self) -> bool {
        false
    }

    /// See [`Tool::rebind`].
    fn rebind(&self, _registry: &super::ToolRegistry) -> Option<std::sync::Arc<dyn Tool>> {
        None
    }

    /// Runs the call with its parsed input.
    fn run<'a>(
        &'a self,
        input: Self::Input,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = ToolOutput> + Send + 'a;
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn description(&self) -> String {
        TypedTool::description(self)
    }

    fn input_schema(&self) -> Value {
        input_schema::<T::Input>()
    }

    fn kind(&self) -> ToolKind {
        TypedTool::kind(self)
    }

    fn is_concurrency_safe(&self, input: &Value) -> bool {
        TypedTool::is_concurrency_safe(self, input)
    }

    fn permission_target(&self, input: &Value) -> PermissionTarget {
        TypedTool::permission_target(self, input)
    }

    fn requires_interaction(&self) -> bool {
        TypedTool::requires_interaction(self)
    }

    fn needs_conversation(&self) -> bool {
        TypedTool::needs_conversation(self)
    }

    fn delegation(&self) -> super::Delegation {
        TypedTool::delegation(self)
    }

    fn manages_sub_agents(&self) -> bool {
        TypedTool::manages_sub_agents(self)
    }

    fn rebind(&self, registry: &super::ToolRegistry) -> Option<std::sync::Arc<dyn Tool>> {
        TypedTool::rebind(self, registry)
    }

    fn summarize(&self, input: &Value) -> String {
        TypedTool::summarize(self, input).unwrap_or_else(|| {
            match TypedTool::permission_target(self, input) {
                PermissionTarget::None => T::NAME.to_string(),
                PermissionTarget::Path(p) => format!("{}({})", T::NAME, p.display()),
                PermissionTarget::Command(c) => format!("{}({})", T::NAME, c),
            }
        })
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        // A call without arguments is an empty object (a tool that takes none accepts it).
        let input = if input.is_null() {
            Value::Object(Map::new())
        } else {
            input
        };
        async move {
            match serde_json::from_value::<T::Input>(input) {
                Ok(input) => self.run(input, ctx).await,
                Err(e) => super::ToolError::InvalidInput {
                    tool: T::NAME,
                    message: e.to_string(),
                }
                .into_output(),
            }
        }
        .boxed()
    }
}

/// The tidied JSON Schema of a tool input type (see the module docs).
pub fn input_schema<I: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<I>().to_value();
    tidy(&mut schema);
    if let Value::Object(top) = &mut schema {
        top.remove("description");
        top.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        top.insert("additionalProperties".to_string(), Value::Bool(false));
    }
    schema
}

fn tidy(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    map.remove("$schema");
    map.remove("title");
    map.remove("format");
    if map.get("default").is_some_and(is_empty_default) {
        map.remove("default");
    }
    if map.get("additionalProperties") == Some(&Value::Bool(true)) {
        map.remove("additionalProperties");
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Array(types)) = map.get("type") {
        let kept: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        if kept.len() == 1 {
            map.insert("type".to_string(), kept[0].clone());
        }
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(tidy);
    }
    if let Some(items) = map.get_mut("items") {
        tidy(items);
    }
    drop_empty(map);
}

/// Whether a field's `default` says nothing a model would not assume: null, false, or
/// an empty string, list or object.
fn is_empty_default(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Bool(true) | Value::Number(_) => false,
    }
}

/// Removes an empty `required` list (schemars leaves none, but a hand-tidied one may).
fn drop_empty(map: &mut Map<String, Value>) {
    if map
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        map.remove("required");
    }
}
