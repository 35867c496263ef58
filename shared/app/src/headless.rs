//! One-shot runs (`roo-lead -p`): run the prompt, print the answer in the chosen
//! format, exit with a code that says how it went.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use roo_agent::event::{AgentEvent, EventSink, Outcome};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::exit::{self, AppError};
use crate::lead::OutputFormat;
use crate::render::{Style, headline};
use crate::setup::Built;

/// Runs `prompt` once and prints the result.
pub async fn run(
    built: &mut Built,
    prompt: &str,
    format: OutputFormat,
    verbose: bool,
) -> Result<ExitCode, AppError> {
    let started = Instant::now();
    let style = Style::for_stderr();
    for notice in &built.notices {
        eprintln!("{}", style.dim(&format!("note: {notice}")));
    }
    let (sink, mut events) = EventSink::channel();
    let cancel = CancellationToken::new();
    // Ctrl+C (SIGINT) or SIGTERM cancel the run cleanly: tools are stopped, the
    // transcript stays consistent, and the exit code says it did not finish.
    let signal_cancel = cancel.clone();
    let signals = tokio::spawn(async move {
        wait_for_termination().await;
        signal_cancel.cancel();
    });

    let printer = tokio::spawn(async move {
        let mut stdout = std::io::stdout();
        while let Some(event) = events.recv().await {
            match format {
                OutputFormat::StreamJson => {
                    if let Ok(line) = serde_json::to_string(&event) {
                        let _ = writeln!(stdout, "{line}");
                        let _ = stdout.flush();
                    }
                }
                OutputFormat::Text | OutputFormat::Json => {
                    if verbose {
                        progress_line(&event, &style);
                    } else if let AgentEvent::Error { message } = &event {
                        eprintln!("{}", style.red(&format!("error: {message}")));
                    }
                }
            }
        }
    });

    let result = built.agent.run(prompt, &sink, cancel).await;
    drop(sink);
    let _ = printer.await;
    signals.abort();

    let session_id = built
        .agent
        .session()
        .map(|s| s.id().to_string())
        .unwrap_or_default();
    let cost = built.agent.cost(&result.usage);
    let code = exit::for_outcome(&result.outcome);
    let mut stdout = std::io::stdout();
    match format {
        OutputFormat::Text => {
            if !result.final_text.is_empty() {
                let _ = writeln!(stdout, "{}", result.final_text.trim_end());
            }
            if !result.outcome.is_success() {
                eprintln!("roo-lead: {}", result.outcome.describe());
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let value = json!({
                "type": "result",
                "outcome": result.outcome,
                "is_error": !result.outcome.is_success(),
                "result": result.final_text,
                "session_id": session_id,
                "turns": result.turns,
                "usage": result.usage,
                "cost_usd": cost,
                "duration_ms": started.elapsed().as_millis() as u64,
                "model": built.agent.model(),
            });
            let _ = writeln!(stdout, "{value}");
        }
    }
    let _ = stdout.flush();
    if let Outcome::Error { message } = &result.outcome
        && format == OutputFormat::Text
    {
        tracing::debug!("run failed: {message}");
    }
    Ok(ExitCode::from(code))
}

/// One progress line on stderr for `--verbose`.
fn progress_line(event: &AgentEvent, style: &Style) {
    match event {
        AgentEvent::AssistantMessage { message } => {
            let text = message.text();
            if !text.trim().is_empty() && message.tool_uses().next().is_some() {
                eprintln!("{}", text.trim_end());
            }
        }
        AgentEvent::ToolStart { summary, .. } => {
            eprintln!("{} {}", style.cyan("●"), first_line(summary));
        }
        AgentEvent::ToolEnd {
            is_error,
            preview,
            duration_ms,
            ..
        } => {
            let status = if *is_error {
                style.red("error")
            } else {
                style.green("ok")
            };
            eprintln!(
                "  {} {} ({} ms) {}",
                style.dim("⎿"),
                status,
                duration_ms,
                style.dim(headline(preview))
            );
        }
        AgentEvent::PermissionDenied {
            summary, reason, ..
        } => {
            eprintln!(
                "  {} {}: {}",
                style.red("denied"),
                first_line(summary),
                reason
            );
        }
        AgentEvent::Compaction {
            method,
            messages_before,
            messages_after,
            ..
        } => eprintln!(
            "{}",
            style.dim(&format!(
                "context compacted ({method:?}): {messages_before} → {messages_after} messages"
            ))
        ),
        AgentEvent::Notice { text } => eprintln!("{}", style.dim(&format!("note: {text}"))),
        AgentEvent::Error { message } => eprintln!("{}", style.red(&format!("error: {message}"))),
        _ => {}
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Resolves on SIGINT or SIGTERM.
pub async fn wait_for_termination() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}
