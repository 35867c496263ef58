//! What the client knows about models: prices and context windows.
//!
//! The price table (USD per million tokens) lets `/cost` and the headless summary turn
//! [`Usage`] into money; the context-window table lets compaction know when to act.
//! Both match model names by longest prefix, so dated snapshots
//! (`claude-sonnet-4-5-20250929`) and router names (`anthropic/claude-sonnet-4.5`)
//! find their family. Prices can be overridden or extended in config (`prices:`);
//! windows with `context_window:`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// Price of one model in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Cached prompt tokens read (Anthropic cache hits, OpenAI cached input).
    pub cache_read: f64,
    /// Prompt tokens written to the cache (Anthropic 5-minute cache writes).
    pub cache_write: f64,
}

impl Price {
    const fn new(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Self {
        Self {
            input,
            output,
            cache_read,
            cache_write,
        }
    }

    /// Cost in USD of `usage` at this price.
    pub fn cost(&self, usage: &Usage) -> f64 {
        (usage.input_tokens as f64 * self.input
            + usage.output_tokens as f64 * self.output
            + usage.cache_read_tokens as f64 * self.cache_read
            + usage.cache_write_tokens as f64 * self.cache_write)
            / 1_000_000.0
    }
}

/// A price as written in config: cache prices default to the input price.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PriceSpec {
    pub input: f64,
    pub output: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl From<PriceSpec> for Price {
    fn from(spec: PriceSpec) -> Self {
        Price::new(
            spec.input,
            spec.output,
            spec.cache_read.unwrap_or(spec.input),
            spec.cache_write.unwrap_or(spec.input),
        )
    }
}

/// Built-in prices (list prices of the providers; OpenAI does not charge cache writes
/// separately, so its write price is the input price). Longest matching prefix wins.
const PRICES: &[(&str, Price)] = &[
    // Anthropic
    ("claude-opus-4-5", Price::new(5.0, 25.0, 0.50, 6.25)),
    ("claude-opus-4-1", Price::new(15.0, 75.0, 1.50, 18.75)),
    ("claude-opus-4", Price::new(15.0, 75.0, 1.50, 18.75)),
    ("claude-sonnet-4", Price::new(3.0, 15.0, 0.30, 3.75)),
    ("claude-3-7-sonnet", Price::new(3.0, 15.0, 0.30, 3.75)),
    ("claude-3-5-sonnet", Price::new(3.0, 15.0, 0.30, 3.75)),
    ("claude-haiku-4-5", Price::new(1.0, 5.0, 0.10, 1.25)),
    ("claude-3-5-haiku", Price::new(0.80, 4.0, 0.08, 1.0)),
    // OpenAI
    ("gpt-5-nano", Price::new(0.05, 0.40, 0.005, 0.05)),
    ("gpt-5-mini", Price::new(0.25, 2.0, 0.025, 0.25)),
    ("gpt-5", Price::new(1.25, 10.0, 0.125, 1.25)),
    ("gpt-4.1-nano", Price::new(0.10, 0.40, 0.025, 0.10)),
    ("gpt-4.1-mini", Price::new(0.40, 1.60, 0.10, 0.40)),
    ("gpt-4.1", Price::new(2.0, 8.0, 0.50, 2.0)),
    ("gpt-4o-mini", Price::new(0.15, 0.60, 0.075, 0.15)),
    ("gpt-4o", Price::new(2.50, 10.0, 1.25, 2.50)),
    ("o4-mini", Price::new(1.10, 4.40, 0.275, 1.10)),
    ("o3-mini", Price::new(1.10, 4.40, 0.55, 1.10)),
    ("o3", Price::new(2.0, 8.0, 0.50, 2.0)),
    // OpenAI-compatible vendors
    ("deepseek-chat", Price::new(0.28, 0.42, 0.028, 0.28)),
    ("deepseek-reasoner", Price::new(0.28, 0.42, 0.028, 0.28)),
];

/// Context windows in tokens by prefix (longest match wins).
const WINDOWS: &[(&str, u64)] = &[
    ("claude-", 200_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("deepseek", 128_000),
    ("glm-4.6", 200_000),
    ("glm-4.5", 128_000),
];

/// Window assumed for models not in the table (local models: set `context_window:` to
/// what the server was started with).
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// The model name without a router prefix (`anthropic/claude-…` → `claude-…`).
fn base_name(model: &str) -> &str {
    model.rsplit('/').next().unwrap_or(model)
}

fn longest_prefix<'a, T: Copy>(
    table: impl Iterator<Item = (&'a str, T)>,
    model: &str,
) -> Option<T> {
    let name = base_name(model);
    // Routers write versions with dots (`claude-sonnet-4.5`); the table uses dashes
    // where the vendor does.
    let dashed = name.replace('.', "-");
    table
        .filter(|(prefix, _)| name.starts_with(prefix) || dashed.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, value)| value)
}

/// Context window of `model` in tokens.
pub fn context_window(model: &str) -> u64 {
    longest_prefix(WINDOWS.iter().copied(), model).unwrap_or(DEFAULT_CONTEXT_WINDOW)
}

/// Built-in price of `model`, if known.
pub fn price(model: &str) -> Option<Price> {
    longest_prefix(PRICES.iter().copied(), model)
}

/// Cost in USD of `usage` on `model` at built-in prices; `None` for unknown models
/// (local models, or ones newer than this table: add them under `prices:`).
pub fn cost(model: &str, usage: &Usage) -> Option<f64> {
    price(model).map(|p| p.cost(usage))
}

/// The built-in prices plus overrides from config (`prices:`), which win.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable {
    overrides: BTreeMap<String, PriceSpec>,
}

impl PriceTable {
    /// A table with these overrides (model name or prefix → price).
    pub fn with_overrides(overrides: BTreeMap<String, PriceSpec>) -> Self {
        Self { overrides }
    }

    /// Adds overrides; entries of `other` replace ones of the same model.
    pub fn merge(&mut self, other: &PriceTable) {
        for (model, price) in &other.overrides {
            self.overrides.insert(model.clone(), *price);
        }
    }

    /// Price of `model`: configured (longest prefix) first, then built-in.
    pub fn price(&self, model: &str) -> Option<Price> {
        longest_prefix(self.overrides.iter().map(|(k, v)| (k.as_str(), *v)), model)
            .map(Price::from)
            .or_else(|| price(model))
    }

    /// Cost in USD of `usage` on `model`, if its price is known.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.price(model).map(|p| p.cost(usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_snapshots_and_router_names() {
        assert_eq!(price("claude-sonnet-4-5-20250929").unwrap().input, 3.0);
        assert_eq!(price("anthropic/claude-sonnet-4.5").unwrap().output, 15.0);
        assert_eq!(price("claude-opus-4-5").unwrap().input, 5.0);
        assert_eq!(price("claude-opus-4-20250514").unwrap().input, 15.0);
        assert_eq!(price("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
        assert_eq!(price("gpt-4.1-mini").unwrap().input, 0.40);
        assert_eq!(price("llama3.1:8b"), None);
        assert_eq!(context_window("gpt-4.1"), 1_047_576);
        assert_eq!(context_window("claude-haiku-4-5"), 200_000);
        assert_eq!(context_window("qwen2.5-coder"), DEFAULT_CONTEXT_WINDOW);
    }

    #[test]
    fn cost_counts_every_kind_of_token() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cache_read_tokens: 1_000_000,
            cache_write_tokens: 1_000_000,
        };
        let c = cost("claude-sonnet-4-5", &usage).unwrap();
        assert!((c - (3.0 + 15.0 + 0.30 + 3.75)).abs() < 1e-9, "{c}");
    }

    #[test]
    fn overrides_win_and_default_cache_prices() {
        let mut table = PriceTable::default();
        let mut overrides = BTreeMap::new();
        overrides.insert(
            "claude-sonnet-4".to_owned(),
            PriceSpec {
                input: 1.0,
                output: 2.0,
                cache_read: None,
                cache_write: Some(0.5),
            },
        );
        table.merge(&PriceTable::with_overrides(overrides));
        let p = table.price("claude-sonnet-4-5").unwrap();
        assert_eq!(
            (p.input, p.output, p.cache_read, p.cache_write),
            (1.0, 2.0, 1.0, 0.5)
        );
        assert_eq!(table.price("gpt-4o").unwrap().input, 2.50);
    }
}
