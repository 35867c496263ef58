//! The terminal under the session: raw mode for as long as it lasts, the thread
//! that reads keys (crossterm's reader blocks, so it cannot sit in a `select!`),
//! and the key chords the session reacts to in every state. Kept apart so the
//! session's loops read as decisions, not terminal plumbing.

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use crossterm::terminal;
use tokio::sync::mpsc;

use crate::exit::AppError;

/// Puts the terminal in raw mode for the session and restores it on drop.
pub(super) struct RawMode;

impl RawMode {
    pub(super) fn enable() -> Result<Self, AppError> {
        terminal::enable_raw_mode()
            .map_err(|e| AppError::Io(format!("failed to set up the terminal: {e}")))?;
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
        Ok(Self)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableBracketedPaste);
        let _ = terminal::disable_raw_mode();
    }
}

/// Reads terminal events on a thread of its own (crossterm's reader blocks). The channel
/// closes when the terminal hangs up (or fails), which ends the session at its prompt.
pub(super) fn spawn_key_reader() -> mpsc::UnboundedReceiver<Event> {
    use roo_cli::top::KeySource;
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut keys = roo_cli::top::TerminalKeys::new();
        loop {
            match keys.next(std::time::Duration::from_secs(60)) {
                Ok(Some(event)) => {
                    if tx.send(event).is_err() {
                        break;
                    }
                }
                Ok(None) => {}
                Err(_) => break,
            }
        }
    });
    rx
}

/// Whether a key is Ctrl+C.
pub(super) fn is_ctrl_c(key: &KeyEvent) -> bool {
    key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL)
}

/// Ctrl+B while the agent works: the sub-agents it waits for go on in the background.
pub(super) fn is_ctrl_b(key: &KeyEvent) -> bool {
    key.code == KeyCode::Char('b') && key.modifiers.contains(KeyModifiers::CONTROL)
}
