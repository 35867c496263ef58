//! Provider API keys are not for the commands the model runs.
//!
//! A command sees the agent's environment minus every variable that looks like
//! an API key (`*_API_KEY`, `*_APIKEY`, `ANTHROPIC_AUTH_TOKEN`) or whose value
//! is the key the agent itself uses, except those the user passes through with
//! `sandbox: {pass_env: [...]}` in the user config.

/// Whether `name` looks like an API key variable.
pub fn is_secret_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.ends_with("_API_KEY") || upper.ends_with("_APIKEY") || upper == "ANTHROPIC_AUTH_TOKEN"
}

/// Names of the variables in `vars` to remove from commands' environment:
/// key-like names and any variable whose value is one of `secret_values`
/// (non-empty), except the names in `pass`.
pub fn scrubbed_env_names(
    vars: impl IntoIterator<Item = (String, String)>,
    secret_values: &[&str],
    pass: &[String],
) -> Vec<String> {
    let mut names: Vec<String> = vars
        .into_iter()
        .filter(|(name, value)| {
            is_secret_env_name(name)
                || secret_values
                    .iter()
                    .any(|secret| !secret.is_empty() && value == secret)
        })
        .map(|(name, _)| name)
        .filter(|name| !pass.iter().any(|p| p == name))
        .collect();
    names.sort();
    names.dedup();
    names
}
