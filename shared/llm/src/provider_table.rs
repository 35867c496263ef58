//! The one table from a [`ProviderKind`] to the [`Provider`] implementation that serves
//! it. Apart from the settings, so the settings stay plain data the providers read and a
//! new provider is one module and one arm here.

use std::sync::Arc;

use crate::anthropic::AnthropicProvider;
use crate::error::Result;
use crate::openai::OpenAiProvider;
use crate::provider::Provider;
use crate::script::ScriptProvider;
use crate::settings::{LlmSettings, ProviderKind};

/// Builds the provider `settings` describe.
pub fn build_provider(settings: &LlmSettings) -> Result<Arc<dyn Provider>> {
    settings.validate()?;
    Ok(match settings.provider {
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(settings)?),
        ProviderKind::OpenAi => Arc::new(OpenAiProvider::new(settings)?),
        ProviderKind::Script => Arc::new(ScriptProvider::from_settings(settings)?),
    })
}
