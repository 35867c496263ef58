//! The mock server's model of Anthropic prompt caching: what a real deployment would
//! read from the cache, write to it and charge in full for each Messages request, so a
//! test or a benchmark can see whether an agent's prompt prefix stays cacheable.
//!
//! The rules modelled, from Anthropic's prompt-caching documentation:
//!
//! - A request is a sequence of blocks in the order tools → system → messages (each
//!   tool definition, each system block, each content block of each message is one).
//! - A block carrying `cache_control` is a breakpoint. The prefix up to and including
//!   it is written to the cache when it is at least the model's minimum cacheable length
//!   ([`min_cacheable_tokens`]); shorter prefixes are not cached, silently.
//! - A request reads the longest prefix written before that ends at one of its
//!   breakpoints or at one of the [`LOOKBACK`] blocks before a breakpoint. A prefix
//!   matches only if every block up to it is identical (same model too): one changed
//!   tool description invalidates everything after it, system and messages included.
//! - The usage splits the prompt into `cache_read_input_tokens` (the prefix read),
//!   `cache_creation_input_tokens` (from there to the last breakpoint written) and
//!   `input_tokens` (the rest, after the last breakpoint). Billed at 0.1×, 1.25× and 1×
//!   the base input price.
//!
//! Token counts are the mock's usual estimate, ceil(bytes / 4): of the whole request
//! body for the total (as without caching), and of each block's JSON without its
//! `cache_control` for a prefix, so a prefix counts the same wherever the markers are.
//! A prefix is remembered as a hash of the model and those blocks (with their section
//! and message boundaries), computed with the standard library's fixed-key hasher so
//! runs are deterministic.
//!
//! Left out: the time to live (entries never expire; a scripted run lasts seconds, far
//! under the 5-minute TTL), isolation between API keys (one server is one organisation:
//! agents sharing a mock share its cache, as a team sharing one key does), the API's
//! rule that an entry is readable once its response has begun (requests are accounted
//! one at a time, and each reads what any request accounted before it wrote),
//! invalidation of message caches by a changed `tool_choice` or thinking setting, and
//! the limit of four breakpoints per request (the mock honours every marker it finds).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hasher};

use serde_json::{Value, json};

use crate::types::Usage;

/// How many blocks before a breakpoint a request looks back for a cached prefix.
pub const LOOKBACK: usize = 20;

/// The minimum cacheable prefix of `model`, in tokens: 4096 for Claude Opus 4.5 and
/// later and Haiku 4.5, 2048 for the other Haiku models, 1024 for the rest (Sonnet,
/// earlier Opus).
pub fn min_cacheable_tokens(model: &str) -> u64 {
    let larger = ["opus-4-5", "opus-4-6", "opus-4-7", "haiku-4-5"];
    if larger.iter().any(|m| model.contains(m)) {
        4096
    } else if model.contains("haiku") {
        2048
    } else {
        1024
    }
}

/// The prefixes written so far, shared by every request to one server.
#[derive(Debug, Default)]
pub(crate) struct PromptCache {
    written: HashSet<u64>,
}

/// One block of a request, with what is known of the prefix ending at it.
struct Block {
    /// Hash of the model and every block up to and including this one.
    prefix: u64,
    /// Bytes of the blocks' JSON up to and including this one.
    bytes: u64,
    /// Whether it carries `cache_control`.
    breakpoint: bool,
}

impl PromptCache {
    /// Accounts the Messages request `body` against the cache (reading, then writing
    /// its breakpoints) and returns `usage` with its prompt split into cache reads,
    /// cache writes and uncached input. The total stays what `usage` says.
    pub(crate) fn split(&mut self, body: &Value, usage: Usage) -> Usage {
        let total = usage.context_tokens();
        let blocks = blocks(body);
        let breakpoints: Vec<usize> = (0..blocks.len())
            .filter(|&i| blocks[i].breakpoint)
            .collect();
        let hit = breakpoints
            .iter()
            .filter_map(|&b| {
                (b.saturating_sub(LOOKBACK)..=b)
                    .rev()
                    .find(|&i| self.written.contains(&blocks[i].prefix))
            })
            .max();
        let read = hit.map_or(0, |i| tokens(blocks[i].bytes));
        let model = body.get("model").and_then(Value::as_str).unwrap_or("");
        let minimum = min_cacheable_tokens(model);
        let mut written_to = read;
        for &b in breakpoints.iter().filter(|&&b| hit.is_none_or(|h| b > h)) {
            let length = tokens(blocks[b].bytes);
            if length >= minimum {
                self.written.insert(blocks[b].prefix);
                written_to = written_to.max(length);
            }
        }
        let read = read.min(total);
        let write = (written_to - read).min(total - read);
        Usage {
            input_tokens: total - read - write,
            cache_read_tokens: read,
            cache_write_tokens: write,
            ..usage
        }
    }
}

/// The mock's token estimate of `bytes`.
fn tokens(bytes: u64) -> u64 {
    bytes.div_ceil(4)
}

/// The blocks of `body` in cache order: tools, system, messages.
fn blocks(body: &Value) -> Vec<Block> {
    let mut hasher = DefaultHasher::new();
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    hasher.write(model.as_bytes());
    hasher.write_u8(0);
    let mut bytes = 0;
    let mut out = Vec::new();
    let mut push = |tag: &str, block: &Value| {
        let mut block = block.clone();
        let breakpoint = block
            .as_object_mut()
            .and_then(|fields| fields.remove("cache_control"))
            .is_some();
        let text = block.to_string();
        hasher.write(tag.as_bytes());
        hasher.write_u8(0);
        hasher.write(text.as_bytes());
        hasher.write_u8(0);
        bytes += text.len() as u64;
        out.push(Block {
            prefix: hasher.finish(),
            bytes,
            breakpoint,
        });
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        push("tool", tool);
    }
    match &body["system"] {
        Value::String(text) => push("system", &json!({"type": "text", "text": text})),
        Value::Array(blocks) => {
            for block in blocks {
                push("system", block);
            }
        }
        _ => {}
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("");
        let content = match &message["content"] {
            Value::Array(blocks) => blocks.clone(),
            other => vec![other.clone()],
        };
        for (i, block) in content.iter().enumerate() {
            // The first block of a message says so, so [A][B] differs from [A, B].
            let tag = if i == 0 {
                format!("message {role}")
            } else {
                role.to_owned()
            };
            push(&tag, block);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = "claude-sonnet-4-5";

    /// A body as the Anthropic provider sends it: breakpoints on the last tool, the
    /// last system block and the last block of the last message.
    fn body(system: &str, messages: &[(&str, &str)]) -> Value {
        let mut messages: Vec<Value> = messages
            .iter()
            .map(|(role, text)| json!({"role": role, "content": [{"type": "text", "text": text}]}))
            .collect();
        if let Some(last) = messages.last_mut() {
            last["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({
            "model": MODEL,
            "max_tokens": 1000,
            "stream": true,
            "tools": [{"name": "ReadFile", "description": "reads a file", "input_schema": {"type": "object"},
                       "cache_control": {"type": "ephemeral"}}],
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "messages": messages,
        })
    }

    /// The usage the mock estimates for `body` before caching.
    fn estimated(body: &Value) -> Usage {
        Usage {
            input_tokens: tokens(body.to_string().len() as u64),
            output_tokens: 3,
            ..Usage::default()
        }
    }

    fn split(cache: &mut PromptCache, body: &Value) -> Usage {
        let usage = cache.split(body, estimated(body));
        assert_eq!(usage.context_tokens(), estimated(body).input_tokens);
        assert_eq!(usage.output_tokens, 3);
        usage
    }

    /// Tokens of the prefix of `body` up to and including its last breakpoint.
    fn prefix_tokens(body: &Value) -> u64 {
        let blocks = blocks(body);
        let last = blocks.iter().rposition(|b| b.breakpoint).unwrap();
        tokens(blocks[last].bytes)
    }

    #[test]
    fn a_second_identical_request_reads_everything_up_to_the_last_breakpoint() {
        let mut cache = PromptCache::default();
        let request = body(&"stable rules ".repeat(600), &[("user", "hello")]);
        let first = split(&mut cache, &request);
        assert_eq!(first.cache_read_tokens, 0);
        assert_eq!(first.cache_write_tokens, prefix_tokens(&request));
        let second = split(&mut cache, &request);
        assert_eq!(second.cache_read_tokens, prefix_tokens(&request));
        assert_eq!(second.cache_write_tokens, 0);
        // Only the envelope (model, keys, brackets) and the markers are outside the
        // blocks.
        assert!(
            second.input_tokens > 0 && second.input_tokens < 100,
            "{second:?}"
        );
    }

    #[test]
    fn a_changed_system_prompt_reads_nothing_past_the_tools() {
        let mut cache = PromptCache::default();
        let rules = "stable rules ".repeat(600);
        split(&mut cache, &body(&rules, &[("user", "hello")]));
        let changed = body(&format!("{rules} Date: tomorrow"), &[("user", "hello")]);
        let usage = split(&mut cache, &changed);
        // The tools alone are under the minimum, so nothing was cached there.
        assert_eq!(usage.cache_read_tokens, 0);
        assert_eq!(usage.cache_write_tokens, prefix_tokens(&changed));
    }

    #[test]
    fn a_growing_conversation_reads_the_old_prefix_and_writes_the_new_part() {
        let mut cache = PromptCache::default();
        let rules = "stable rules ".repeat(600);
        let turn1 = body(&rules, &[("user", "read a.log")]);
        split(&mut cache, &turn1);
        let log = "line\n".repeat(2000);
        let turn2 = body(
            &rules,
            &[
                ("user", "read a.log"),
                ("assistant", "reading"),
                ("user", &log),
            ],
        );
        let usage = split(&mut cache, &turn2);
        assert_eq!(usage.cache_read_tokens, prefix_tokens(&turn1));
        assert_eq!(
            usage.cache_write_tokens,
            prefix_tokens(&turn2) - prefix_tokens(&turn1)
        );
    }

    #[test]
    fn prefixes_under_the_minimum_are_not_cached() {
        let mut cache = PromptCache::default();
        let short = body("short rules", &[("user", "hello")]);
        assert!(prefix_tokens(&short) < 1024);
        split(&mut cache, &short);
        let usage = split(&mut cache, &short);
        assert_eq!((usage.cache_read_tokens, usage.cache_write_tokens), (0, 0));
        assert_eq!(min_cacheable_tokens("claude-haiku-4-5"), 4096);
        assert_eq!(min_cacheable_tokens("claude-3-5-haiku-latest"), 2048);
    }

    #[test]
    fn a_prefix_more_than_the_lookback_before_every_breakpoint_is_missed() {
        let mut cache = PromptCache::default();
        let rules = "stable rules ".repeat(600);
        let turn1 = body(&rules, &[("user", "start")]);
        split(&mut cache, &turn1);
        let mut grown = vec![("user", "start")];
        for _ in 0..=LOOKBACK / 2 {
            grown.extend([("assistant", "call"), ("user", "result")]);
        }
        let usage = split(&mut cache, &body(&rules, &grown));
        // The old message prefix is 22 blocks back: only the system breakpoint is read.
        assert!(usage.cache_read_tokens > 0);
        assert!(usage.cache_read_tokens < prefix_tokens(&turn1));
    }

    #[test]
    fn another_model_does_not_read_the_cache() {
        let mut cache = PromptCache::default();
        let request = body(&"stable rules ".repeat(600), &[("user", "hello")]);
        split(&mut cache, &request);
        let mut other = request.clone();
        other["model"] = json!("claude-opus-4-1");
        assert_eq!(split(&mut cache, &other).cache_read_tokens, 0);
    }
}
