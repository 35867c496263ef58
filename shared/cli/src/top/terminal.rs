//! The live view's terminal loop: the alternate screen and raw mode (restored on every
//! way out: return, error, panic, SIGTERM, SIGHUP, SIGINT), keys, and a redraw when the store
//! changes, when the terminal is resized, and each second (for ages, and for what no
//! watcher covers, such as a process that died). One watcher for the whole team, on its
//! event log (files and PostgreSQL alike): every change of the roster, the tasks and the
//! messages appends to it in the same locked change, so it alone says when to re-read;
//! a busy team re-reads at most [`RELOADS`] times a second.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, queue, terminal};
use roo_store::{Team, WaitOutcome, WatchWaker};
use roo_term::Style;

use super::frame::{FrameOptions, render};
use super::model::{Snapshot, TaskCache, TeamView};
use crate::exit::CliResult;

/// Where the view's keys come from.
pub trait KeySource {
    /// The next terminal event within `timeout`, if any.
    fn next(&mut self, timeout: Duration) -> io::Result<Option<Event>>;
}

/// Keys read from the terminal by this thread (`roo-mail team top`, and the interactive
/// lead's key reader). A terminal that hung up ends the keys with a `BrokenPipe` error.
#[derive(Debug)]
pub struct TerminalKeys {
    /// Whether stdin was a terminal when the keys began (a hung-up terminal no longer
    /// says it is one).
    stdin_terminal: bool,
}

impl TerminalKeys {
    /// Keys from this process's terminal.
    pub fn new() -> TerminalKeys {
        TerminalKeys {
            stdin_terminal: std::io::IsTerminal::is_terminal(&io::stdin()),
        }
    }
}

impl Default for TerminalKeys {
    fn default() -> Self {
        Self::new()
    }
}

impl KeySource for TerminalKeys {
    fn next(&mut self, timeout: Duration) -> io::Result<Option<Event>> {
        // crossterm reads a terminal that hung up over and over (its reads return 0 at
        // once): with its default reader for ever, a spinning process deaf to signals.
        // Built with `use-dev-tty` it polls the terminal (level-triggered) and stops at
        // the timeout; so it is asked for short spans, and the hang-up is looked for
        // between them.
        if self.stdin_terminal && stdin_hung_up() {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the terminal hung up",
            ));
        }
        if crossterm::event::poll(timeout.clamp(Duration::from_millis(1), MAX_WAIT))? {
            crossterm::event::read().map(Some)
        } else {
            Ok(None)
        }
    }
}

/// The longest one wait for a key lasts, so a hang-up is seen within it.
const MAX_WAIT: Duration = Duration::from_millis(250);

/// Whether stdin, a terminal, hung up (or failed). Only on Linux, where `poll` supports
/// terminals; elsewhere, and when stdin is no terminal (crossterm then reads `/dev/tty`),
/// a hang-up ends the view through SIGHUP.
fn stdin_hung_up() -> bool {
    #[cfg(target_os = "linux")]
    {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let stdin = io::stdin();
        // No events asked: only a hang-up, an error or a closed descriptor are reported.
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::empty())];
        matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Who owns raw mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The view: it enables raw mode, restores it on every exit, and handles SIGTERM,
    /// SIGHUP and panics (`roo-mail team top`).
    Own,
    /// The caller, already in raw mode (the interactive lead): the view leaves it on.
    Caller,
}

/// The redraw interval without a change (ages move each second).
const TICK: Duration = Duration::from_secs(1);
/// How long one wait for a key lasts before store changes and signals are looked at.
const STEP: Duration = Duration::from_millis(50);
/// At most this many reads of the store a second, however fast it changes.
const RELOADS: u32 = 4;

/// The alternate screen (and raw mode if it owns it) until dropped.
struct Screen {
    owner: Owner,
}

fn leave(owner: Owner) {
    let mut out = io::stdout();
    let _ = crossterm::execute!(out, cursor::Show, terminal::LeaveAlternateScreen);
    if owner == Owner::Own {
        let _ = terminal::disable_raw_mode();
    }
}

impl Screen {
    fn enter(owner: Owner) -> io::Result<Screen> {
        if owner == Owner::Own {
            terminal::enable_raw_mode()?;
        }
        let screen = Screen { owner };
        crossterm::execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        leave(self.owner);
    }
}

/// Wakes the loop when the team's event log grows: one watcher and one thread, however
/// many members and inboxes the team has.
struct StoreWatch {
    changes: mpsc::Receiver<()>,
    waker: Option<WatchWaker>,
}

impl StoreWatch {
    /// Starts watching `team`'s log (without a watcher, the tick alone redraws).
    fn start(team: &Team) -> StoreWatch {
        let (tx, changes) = mpsc::channel();
        let Ok(mut watcher) = team.event_watcher() else {
            return StoreWatch {
                changes,
                waker: None,
            };
        };
        let waker = Some(watcher.waker());
        std::thread::spawn(move || {
            while watcher.wait(Duration::from_secs(3600)) != WaitOutcome::Stopped {
                if tx.send(()).is_err() {
                    break;
                }
            }
        });
        StoreWatch { changes, waker }
    }

    /// Whether anything changed since last asked.
    fn changed(&self) -> bool {
        let mut any = false;
        while self.changes.try_recv().is_ok() {
            any = true;
        }
        any
    }
}

impl Drop for StoreWatch {
    fn drop(&mut self) {
        if let Some(w) = &self.waker {
            w.stop();
        }
    }
}

/// SIGTERM, SIGHUP and SIGINT (Ctrl-C is a key in raw mode; this is `kill -INT`) as a
/// flag the loop looks at (only when the view owns the terminal:
/// the interactive lead keeps its own handling).
struct Signals {
    flag: Arc<AtomicBool>,
    ids: Vec<signal_hook::SigId>,
}

impl Signals {
    fn install(owner: Owner) -> Signals {
        let flag = Arc::new(AtomicBool::new(false));
        let mut ids = Vec::new();
        if owner == Owner::Own {
            for sig in [
                signal_hook::consts::SIGTERM,
                signal_hook::consts::SIGHUP,
                signal_hook::consts::SIGINT,
            ] {
                if let Ok(id) = signal_hook::flag::register(sig, Arc::clone(&flag)) {
                    ids.push(id);
                }
            }
        }
        Signals { flag, ids }
    }

    fn raised(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// The view's state between frames.
struct Live {
    view: Option<TeamView>,
    tasks: TaskCache,
    selected: usize,
    follow: bool,
    notice: Option<String>,
}

/// What a key asks for.
enum Act {
    Quit,
    Redraw,
    Nothing,
}

impl Live {
    fn load(&mut self, team: &Team) {
        match Snapshot::load_kept(team, &mut self.tasks) {
            Ok(s) => {
                self.view = Some(TeamView::build(s));
                if self
                    .notice
                    .as_deref()
                    .is_some_and(|n| n.starts_with("failed"))
                {
                    self.notice = None;
                }
            }
            Err(e) => self.notice = Some(format!("failed to read the team: {e}")),
        }
    }

    fn key(&mut self, key: KeyEvent, team: &Team) -> Act {
        if key.kind == KeyEventKind::Release {
            return Act::Nothing;
        }
        let members = self.view.as_ref().map_or(0, |v| v.members.len());
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') if ctrl => return Act::Quit,
            KeyCode::Char('q') => return Act::Quit,
            KeyCode::Esc if self.follow => self.follow = false,
            KeyCode::Esc => return Act::Quit,
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                self.selected = (self.selected + 1).min(members.saturating_sub(1));
            }
            KeyCode::Enter | KeyCode::Char('f') => self.follow = !self.follow,
            KeyCode::Char('o') => {
                self.notice = self
                    .view
                    .as_ref()
                    .and_then(|v| v.members.get(self.selected))
                    .map(|m| super::pane::open(m, team.name().as_str()));
            }
            _ => return Act::Nothing,
        }
        Act::Redraw
    }

    /// The frame's lines at `width`×`height`: the view, or, before the team could be
    /// read once, why not (never a blank screen).
    fn lines(&self, width: usize, height: usize, style: Style) -> Vec<String> {
        let Some(view) = &self.view else {
            let why = self.notice.as_deref().unwrap_or("reading the team…");
            return [why, "", "q quit"]
                .iter()
                .take(height)
                .map(|l| super::frame::fit(&crate::output::escape(l), width))
                .collect();
        };
        let options = FrameOptions {
            width,
            height,
            style,
            selected: self.selected,
            follow: self.follow,
            interactive: true,
            notice: self.notice.clone(),
        };
        render(view, &options)
    }

    fn draw(&self, out: &mut impl Write, style: Style) -> io::Result<()> {
        let (w, h) = terminal::size().unwrap_or(super::DEFAULT_SIZE);
        let lines = self.lines(usize::from(w), usize::from(h), style);
        queue!(out, crossterm::terminal::BeginSynchronizedUpdate)?;
        for (i, line) in lines.iter().enumerate() {
            let row = u16::try_from(i).unwrap_or(u16::MAX);
            queue!(out, cursor::MoveTo(0, row))?;
            write!(out, "{line}")?;
            queue!(out, terminal::Clear(terminal::ClearType::UntilNewLine))?;
        }
        queue!(
            out,
            terminal::Clear(terminal::ClearType::FromCursorDown),
            crossterm::terminal::EndSynchronizedUpdate
        )?;
        out.flush()
    }
}

/// Restores the terminal before a panic's message is printed (then the hook before).
fn restore_on_panic(owner: Owner) {
    if owner == Owner::Own {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            leave(Owner::Own);
            before(info);
        }));
    }
}

/// Runs the live view of `team` until a quit key (or, owning the terminal, SIGTERM or
/// SIGHUP). The terminal is restored on every way out.
pub fn run(team: &Team, keys: &mut dyn KeySource, owner: Owner) -> CliResult {
    let style = Style::for_stdout();
    let signals = Signals::install(owner);
    restore_on_panic(owner);
    let watch = StoreWatch::start(team);
    let _screen = Screen::enter(owner)?;
    let mut out = io::BufWriter::new(io::stdout());
    let mut live = Live {
        view: None,
        tasks: TaskCache::default(),
        selected: 0,
        follow: false,
        notice: None,
    };
    live.load(team);
    live.draw(&mut out, style)?;
    let mut last = Instant::now();
    let mut changed = false;
    loop {
        if signals.raised() {
            return Ok(());
        }
        let mut redraw = false;
        changed |= watch.changed();
        let since = last.elapsed();
        if (changed && since >= TICK / RELOADS) || since >= TICK {
            live.load(team);
            last = Instant::now();
            changed = false;
            redraw = true;
        }
        match keys.next(STEP)? {
            Some(Event::Key(key)) => match live.key(key, team) {
                Act::Quit => return Ok(()),
                Act::Redraw => redraw = true,
                Act::Nothing => {}
            },
            Some(Event::Resize(..)) => redraw = true,
            _ => {}
        }
        if redraw {
            live.draw(&mut out, style)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31 review: a team that cannot be read at start drew nothing at all.
    #[test]
    fn a_failed_first_read_shows_why_instead_of_a_blank_screen() {
        let dir = tempfile::tempdir().unwrap();
        let home = roo_store::RooHome::new(dir.path());
        let name = |s: &str| roo_store::Name::parse(s).unwrap();
        let lead = roo_store::Member::new(name("lead"), &name("missing"));
        let team = Team::create(&home, name("missing"), "", lead, Vec::new()).unwrap();
        // A roster that cannot be read (a file where the store wants JSON).
        std::fs::write(team.config_path(), "{ not json").unwrap();
        let mut live = Live {
            view: None,
            tasks: TaskCache::default(),
            selected: 0,
            follow: false,
            notice: None,
        };
        live.load(&team);
        let lines = live.lines(80, 24, Style::plain());
        let frame = lines.join("\n");
        assert!(frame.contains("failed to read the team"), "{frame}");
        assert!(frame.contains("missing"), "{frame}");
        assert!(frame.contains("q quit"), "{frame}");
    }
}
