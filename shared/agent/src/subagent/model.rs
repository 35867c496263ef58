//! Which model a sub-agent uses: the Agent call's `model`, else its definition's
//! `model:`, else its parent's. The aliases `haiku`, `sonnet` and `opus` name the
//! current Anthropic models; `inherit` is the parent's.

/// Current Anthropic models behind the aliases (see `roo_llm::models` for prices).
pub const ALIASES: [(&str, &str); 3] = [
    ("haiku", "claude-haiku-4-5"),
    ("sonnet", "claude-sonnet-4-5"),
    ("opus", "claude-opus-4-5"),
];

/// The model to put in the child's requests (empty: the provider's, as for the
/// parent), from what was asked on a provider named `provider` whose parent uses
/// `parent_model`. An alias an OpenAI-compatible provider cannot map is an error
/// saying what to write instead.
pub fn resolve(
    requested: Option<&str>,
    provider: &str,
    parent_model: &str,
) -> Result<String, String> {
    let Some(requested) = requested.map(str::trim).filter(|m| !m.is_empty()) else {
        return Ok(parent_model.to_string());
    };
    if requested.eq_ignore_ascii_case("inherit") {
        return Ok(parent_model.to_string());
    }
    let alias = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(requested));
    match alias {
        // Anthropic, and the scripted provider, which plays any model.
        Some((_, model)) if provider != "openai" => Ok((*model).to_string()),
        Some((alias, _)) => Err(format!(
            "use the model `{alias}`: it is an alias of an Anthropic model, and this session \
             talks to an OpenAI-compatible provider; write the model's full name as that \
             provider knows it (e.g. the one in your config's `model:`), or `inherit`"
        )),
        None if requested.chars().any(char::is_control) || requested.len() > 200 => {
            Err("use the model: its name is not a model name".to_string())
        }
        None => Ok(requested.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_map_on_anthropic_and_fail_clearly_on_openai() {
        assert_eq!(resolve(None, "anthropic", "m").unwrap(), "m");
        assert_eq!(resolve(Some("inherit"), "openai", "m").unwrap(), "m");
        assert_eq!(
            resolve(Some("Haiku"), "anthropic", "m").unwrap(),
            "claude-haiku-4-5"
        );
        let err = resolve(Some("opus"), "openai", "gpt-4o").unwrap_err();
        assert!(err.contains("OpenAI-compatible"), "{err}");
        assert_eq!(
            resolve(Some("gpt-4o-mini"), "openai", "m").unwrap(),
            "gpt-4o-mini"
        );
        assert!(resolve(Some("a\nb"), "openai", "m").is_err());
    }
}
