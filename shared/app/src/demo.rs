//! `roo-lead demo`: a whole team at work without an API key or a network.
//!
//! In a temporary directory it creates a small git repository whose tests fail in two
//! modules and a state directory, then runs the real lead — built by the same
//! [`setup`](crate::setup) as `roo-lead -p`, teammates on the backend the normal
//! `--teammate-mode` / detection path chooses — with the scripted provider
//! ([`project::SCRIPT`]: the lead's, alice's and bob's turns). The tools are real: the lead
//! creates the team and its tasks and spawns alice and bob in their own worktrees; they
//! claim tasks, run the tests, edit, commit, message each other and the lead; the lead
//! merges both branches, runs the suite and deletes the team.
//!
//! The demo plays the user: it gives the lead three prompts, each once the team has
//! settled (every teammate idle, no message waiting): form the team and get the work
//! done; merge and verify; clean up. In-process teammates' output is shown interleaved
//! with the lead's ([`crate::render::interleaved`]). It ends with a summary computed from
//! the team's store and the lead's usage ([`summary`]), and removes its directory unless
//! `--keep` (which also leaves the team in place, to inspect with `roo-task` and
//! `roo-mail`).

pub mod project;
pub mod summary;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use roo_agent::event::{AgentEvent, EventSink};
use roo_store::{Name, ReadFilter, RooHome, Team};
use roo_team::backend::detect::{
    Choice, DetectEnv, Detection, Mode as DetectMode, TmuxPlacement, detect,
};
use roo_team::{MemberEvent, TeamEvent, TeammateOutput};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::exit::{self, AppError};
use crate::flags::{DemoArgs, LeadArgs};
use crate::headless::{self, TEAM_TURN_INPUT, TeamRun};
use crate::render::Style;
use crate::render::interleaved::Interleaved;
use crate::setup::{self, Built};

/// The user's first prompt: form the team and get the work done.
pub const PROMPT_WORK: &str = "The tests of textkit fail in two modules (run `sh run-tests`). \
Form a team, give alice and bob one module each to fix in their own worktrees, and wait \
for their reports.";
/// The second, once alice and bob are idle.
pub const PROMPT_MERGE: &str =
    "alice and bob are done. Merge their branches, run the whole test suite and complete task 3.";
/// The third (not with `--keep`).
pub const PROMPT_CLEAN_UP: &str =
    "Thanks. Delete the team: shut the teammates down and remove their worktrees.";

/// What the terminal shows, from the lead, its teammates, the team and the demo itself.
enum Shown {
    Lead(AgentEvent),
    Member(MemberEvent),
    Team(TeamEvent),
    Line(String),
}

/// Runs the demo; `lead` holds roo-lead's own flags (`--teammate-mode`, `--no-sandbox`).
pub fn run(lead: &LeadArgs, demo: &DemoArgs) -> Result<ExitCode, AppError> {
    if lead.prompt.is_some()
        || lead.resume.is_some()
        || lead.continue_latest
        || lead.team.is_some()
        || lead.cwd.is_some()
    {
        return Err(AppError::Usage(
            "roo-lead demo makes its own repository and prompts; drop -p, --resume, \
             --continue, --team and --cwd"
                .to_string(),
        ));
    }
    let started = Instant::now();
    let world = project::World::create(demo.pace_ms)?;
    let mode = demo_mode(
        demo.teammate_mode.unwrap_or(lead.teammate_mode),
        &DetectEnv::capture(DetectMode::Auto),
    );
    let args = lead_args(lead, demo, &world, mode)?;
    let style = Style::for_stdout();
    let outcome = crate::entry::block_on(play(&args, demo, &world, style, started))?;
    let root = world.root.path().to_path_buf();
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            if demo.keep {
                let _ = world.root.keep();
                eprintln!("roo-lead demo: kept {} for inspection", root.display());
            }
            return match e {
                Failure::App(e) => Err(e),
                Failure::Unfinished(why) => {
                    eprintln!("roo-lead demo: {why}");
                    Ok(ExitCode::from(exit::NOT_COMPLETED))
                }
            };
        }
    };
    println!();
    print!("{}", report.summary.render(style));
    if demo.keep {
        let kept = world.root.keep();
        println!();
        println!("Kept {} (--keep). Inspect it with:", kept.display());
        println!(
            "  cd {}/{} && git log --graph --oneline --all",
            kept.display(),
            project::PROJECT_DIR
        );
        println!(
            "  ROO_HOME={}/roo-home roo-task --team demo list",
            kept.display()
        );
        println!(
            "  ROO_HOME={}/roo-home roo-mail --team demo read --as lead --archived",
            kept.display()
        );
    } else {
        world
            .root
            .close()
            .map_err(|e| AppError::Io(format!("failed to remove {}: {e}", root.display())))?;
    }
    Ok(ExitCode::from(report.code))
}

/// Where the demo's teammates run: what `roo-lead` would choose, except that `auto`'s
/// detached tmux session (a terminal outside tmux, with tmux installed) becomes
/// in-process — the demo is watched on this terminal, which would show none of a
/// detached session's panes. A mode the user forces is kept.
fn demo_mode(mode: DetectMode, env: &DetectEnv) -> DetectMode {
    if mode != DetectMode::Auto {
        return mode;
    }
    match detect(env) {
        Ok(Detection {
            choice: Choice::Tmux(TmuxPlacement::DetachedSession),
            ..
        }) => DetectMode::InProcess,
        _ => mode,
    }
}

/// The lead's flags for the demo: the scripted provider, the demo's repository, full
/// trust of this throwaway project and no permission questions (commands still run in
/// the OS sandbox unless `--no-sandbox`).
fn lead_args(
    lead: &LeadArgs,
    demo: &DemoArgs,
    world: &project::World,
    mode: DetectMode,
) -> Result<LeadArgs, AppError> {
    let mode = mode
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_else(|| "auto".to_string());
    let mut argv: Vec<std::ffi::OsString> = vec![
        "roo-lead".into(),
        "-p".into(),
        PROMPT_WORK.into(),
        "--provider".into(),
        "script".into(),
        "--model".into(),
        "script".into(),
        "--script".into(),
        world.script().into(),
        "--cwd".into(),
        world.repo().into(),
        "--permission-mode".into(),
        "bypassPermissions".into(),
        "--trust-project".into(),
        "--teammate-mode".into(),
        mode.into(),
        "--team-timeout".into(),
        demo.timeout.to_string().into(),
    ];
    if lead.no_sandbox {
        argv.push("--no-sandbox".into());
    }
    <LeadArgs as clap::Parser>::try_parse_from(argv)
        .map_err(|e| AppError::Usage(format!("failed to set up the demo's lead: {e}")))
}

/// Why the demo stopped early: an error of the app (its exit code), or a step that did
/// not finish (exit 1, like a `-p` run that did not finish).
enum Failure {
    App(AppError),
    Unfinished(String),
}

impl From<AppError> for Failure {
    fn from(e: AppError) -> Failure {
        Failure::App(e)
    }
}

struct Report {
    summary: summary::Summary,
    code: u8,
}

/// The three steps, with the terminal output running beside them.
async fn play(
    args: &LeadArgs,
    demo: &DemoArgs,
    world: &project::World,
    style: Style,
    started: Instant,
) -> Result<Report, Failure> {
    let mut built = setup::build_in(args, false, RooHome::new(world.roo_home())).await?;
    let (output, member_events) = TeammateOutput::channel();
    built.spawner.set_output(output);
    let (shown_tx, shown) = mpsc::unbounded_channel::<Shown>();
    let (sink, lead_events) = EventSink::channel();
    let (_, placeholder) = roo_team::team_events();
    let team_events = std::mem::replace(&mut built.team_events, placeholder);
    let forward = spawn_forward(lead_events, member_events, team_events, shown_tx.clone());
    let printer = spawn_screen(shown, built.team.clone(), style);
    let cancel = CancellationToken::new();
    let mut director = Director {
        shown: shown_tx,
        sink,
        cancel: cancel.clone(),
        timeout: Duration::from_secs(demo.timeout),
        style,
        lead_usage: roo_llm::Usage::default(),
        lead_requests: 0,
    };
    director.say(style.bold(&format!(
        "RooCode Teams demo — a scripted lead and two teammates fix a repository in {}",
        world.repo().display()
    )));
    director.say(style.dim(&format!(
        "teammates run {} · no API key, no network: the models are scripted, the tools are real",
        backend_words(built.teammate_mode)
    )));
    let signals = tokio::spawn(async move {
        headless::wait_for_termination().await;
        cancel.cancel();
    });
    let result = director.steps(&mut built, demo.keep).await;
    signals.abort();
    let subagents = subagent_usage(&built);
    let running = built.spawner.names();
    // Pane teammates are ended and their panes closed (nothing is left running).
    built.spawner.shutdown(false).await;
    let Director {
        shown: shown_tx,
        sink,
        lead_usage,
        lead_requests,
        ..
    } = director;
    // Ends the lead's team tasks and every in-process teammate.
    drop(built);
    drop(sink);
    drop(shown_tx);
    let _ = forward.await;
    let _ = printer.await;
    let record = result?;
    if !running.is_empty() && !demo.keep {
        tracing::warn!(
            ?running,
            "teammates were still running at the end of the demo"
        );
    }
    let summary = summary::Summary {
        record,
        lead: lead_usage,
        lead_requests,
        subagents,
        elapsed: started.elapsed(),
    };
    let code = if summary.record.all_completed() {
        0
    } else {
        exit::NOT_COMPLETED
    };
    Ok(Report { summary, code })
}

/// One writer: every source is forwarded into one ordered queue, until the lead's and
/// the teammates' event streams end (the team's event sender lives as long as the
/// lead's team binding, which `--keep` leaves in place: what it reported by then is
/// drained, not waited for).
fn spawn_forward(
    mut lead_events: mpsc::UnboundedReceiver<AgentEvent>,
    mut member_events: mpsc::UnboundedReceiver<MemberEvent>,
    mut team_events: mpsc::Receiver<TeamEvent>,
    shown_tx: mpsc::UnboundedSender<Shown>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (mut lead_open, mut members_open) = (true, true);
        while lead_open || members_open {
            let item = tokio::select! {
                biased;
                e = lead_events.recv(), if lead_open => match e {
                    Some(e) => Shown::Lead(e),
                    None => { lead_open = false; continue; }
                },
                e = member_events.recv(), if members_open => match e {
                    Some(e) => Shown::Member(e),
                    None => { members_open = false; continue; }
                },
                Some(e) = team_events.recv() => Shown::Team(e),
            };
            if shown_tx.send(item).is_err() {
                return;
            }
        }
        while let Ok(e) = team_events.try_recv() {
            let _ = shown_tx.send(Shown::Team(e));
        }
    })
}

/// The terminal: what `shown` brings, interleaved, each teammate in its roster colour.
fn spawn_screen(
    mut shown: mpsc::UnboundedReceiver<Shown>,
    slot: roo_team::TeamSlot,
    style: Style,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut screen = Interleaved::new(std::io::stdout(), style);
        let mut seen = std::collections::HashSet::new();
        while let Some(item) = shown.recv().await {
            match item {
                Shown::Lead(event) => screen.lead_event(&event),
                Shown::Member(MemberEvent { member, event }) => {
                    if seen.insert(member.clone())
                        && let Some(colour) = roster_colour(&slot, &member).await
                    {
                        screen.set_colour(member.as_str(), &colour);
                    }
                    screen.member_event(member.as_str(), &event)
                }
                Shown::Team(event) => screen.line(&style.dim(&event.line())),
                Shown::Line(text) => screen.line(&text),
            }
        }
        screen.finish();
    })
}

/// What the lead's sub-agents spent (a model request per turn).
fn subagent_usage(built: &Built) -> Vec<(String, roo_llm::Usage, u64)> {
    built
        .subagents
        .as_ref()
        .map(|runtime| {
            runtime
                .tasks()
                .list()
                .into_iter()
                .map(|t| {
                    (
                        format!("{} {}", t.id, t.agent_type),
                        t.usage,
                        u64::from(t.turns),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Plays the lead's part: the steps' headings and prompts on the screen, the lead's
/// runs, and what they spent.
struct Director {
    shown: mpsc::UnboundedSender<Shown>,
    sink: EventSink,
    cancel: CancellationToken,
    timeout: Duration,
    style: Style,
    lead_usage: roo_llm::Usage,
    lead_requests: u64,
}

impl Director {
    fn say(&self, text: String) {
        let _ = self.shown.send(Shown::Line(text));
    }

    /// The three steps; the team's record as it stood after the merge.
    async fn steps(
        &mut self,
        built: &mut Built,
        keep: bool,
    ) -> Result<summary::TeamRecord, Failure> {
        self.step(
            built,
            "1. The lead forms a team and splits the work",
            PROMPT_WORK,
        )
        .await?;
        self.step(
            built,
            "2. The lead merges both branches and verifies",
            PROMPT_MERGE,
        )
        .await?;
        let team =
            built.team.get().map(|b| b.team.clone()).ok_or_else(|| {
                Failure::Unfinished("the lead has no team after step 2".to_string())
            })?;
        let snapshot = tokio::task::spawn_blocking(move || summary::TeamRecord::read(&team))
            .await
            .map_err(|e| AppError::Io(format!("failed to read the team: {e}")))??;
        if !keep {
            self.step(built, "3. The lead cleans up", PROMPT_CLEAN_UP)
                .await?;
            if built.team.get().is_some() {
                return Err(Failure::Unfinished(
                    "the lead's team still exists after the clean-up step".to_string(),
                ));
            }
        }
        Ok(snapshot)
    }

    /// One step: the lead runs `prompt`, then the team settles — every teammate idle
    /// with nothing waiting that would wake it, and nothing for the lead (an answer
    /// that came late is a turn of its own).
    async fn step(
        &mut self,
        built: &mut Built,
        heading: &str,
        prompt: &str,
    ) -> Result<(), Failure> {
        self.say(String::new());
        self.say(self.style.bold(&format!("── {heading}")));
        self.say(format!("{} {}", self.style.cyan("you ›"), prompt));
        self.lead_run(built, prompt).await?;
        loop {
            settle(built, self.timeout).await?;
            if !lead_has_input(built).await {
                return Ok(());
            }
            self.lead_run(built, TEAM_TURN_INPUT).await?;
        }
    }

    /// One lead run with its team, counted.
    async fn lead_run(&mut self, built: &mut Built, input: &str) -> Result<(), Failure> {
        let run =
            headless::run_with_team(built, input, &self.sink, &self.cancel, self.timeout).await;
        self.lead_usage.add(&run.usage);
        self.lead_requests += u64::from(run.turns);
        check(&run)
    }
}

/// A lead run that did not complete, or a team that did not settle in time, ends the
/// demo with the reason.
fn check(run: &TeamRun) -> Result<(), Failure> {
    if let Some(busy) = &run.timed_out {
        let names: Vec<&str> = busy.iter().map(Name::as_str).collect();
        return Err(Failure::Unfinished(format!(
            "the demo's teammates are still busy after the timeout (--timeout): {}",
            names.join(", ")
        )));
    }
    if !run.result.outcome.is_success() {
        return Err(Failure::Unfinished(format!(
            "the demo's lead did not finish: {}",
            run.result.outcome.describe()
        )));
    }
    Ok(())
}

/// Waits until every teammate is idle (or dead) with no message in its inbox that
/// would wake it; polls the store every 50 ms, up to `timeout`.
async fn settle(built: &Built, timeout: Duration) -> Result<(), Failure> {
    let Some(binding) = built.team.get() else {
        return Ok(());
    };
    let team = binding.team.clone();
    let deadline = Instant::now() + timeout;
    loop {
        let check = team.clone();
        let quiet = tokio::task::spawn_blocking(move || quiet(&check))
            .await
            .map_err(|e| AppError::Io(format!("failed to read the team: {e}")))??;
        if quiet {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Failure::Unfinished(format!(
                "the demo's team did not settle within {} s (--timeout)",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every member but the lead idle, dead or not started (nobody works as it), and no unread
/// message that wakes one.
fn quiet(team: &Team) -> Result<bool, AppError> {
    let config = team.config().map_err(exit::store_error)?;
    let mailbox = team.mailbox();
    let unread = ReadFilter {
        unread_only: true,
        ..ReadFilter::default()
    };
    for member in &config.members {
        if member.agent_id == config.lead_agent_id {
            continue;
        }
        if member.observed_state() == roo_store::MemberState::Busy {
            return Ok(false);
        }
        let waiting = mailbox
            .read(&member.name, &unread)
            .map_err(exit::store_error)?;
        if waiting.iter().any(roo_team::teammate::wake::wakes_teammate) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the lead's inbox holds a message for its conversation.
async fn lead_has_input(built: &Built) -> bool {
    let Some(binding) = built.team.get() else {
        return false;
    };
    if let Err(e) = binding.router.poll().await {
        tracing::warn!(error = %e, "failed to read the lead's inbox");
    }
    binding.router.has_conversation()
}

/// The colour the team's roster gives `member`, if any.
async fn roster_colour(slot: &roo_team::TeamSlot, member: &Name) -> Option<String> {
    let team = slot.get()?.team.clone();
    let member = member.clone();
    tokio::task::spawn_blocking(move || team.config().ok()?.member(member.as_str())?.color.clone())
        .await
        .ok()
        .flatten()
}

fn backend_words(mode: roo_store::BackendType) -> &'static str {
    match mode {
        roo_store::BackendType::InProcess => {
            "in-process (their lines are prefixed with their names)"
        }
        roo_store::BackendType::Tmux => "in tmux panes",
        roo_store::BackendType::Iterm2 => "in iTerm2 panes",
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use roo_team::backend::detect::{DetectEnv, Mode};

    use super::demo_mode;

    fn terminal(tmux_var: Option<&str>, tmux: bool) -> DetectEnv {
        DetectEnv {
            mode: Mode::Auto,
            tmux_var: tmux_var.map(str::to_string),
            term_program: None,
            iterm_session_id: None,
            stdin_tty: true,
            stdout_tty: true,
            tmux: tmux.then(|| PathBuf::from("/usr/bin/tmux")),
            it2: None,
        }
    }

    #[test]
    fn on_a_plain_terminal_with_tmux_installed_the_demo_runs_in_process_not_detached() {
        let plain = terminal(None, true);
        assert_eq!(demo_mode(Mode::Auto, &plain), Mode::InProcess);
        // Forced, the user gets the detached session.
        assert_eq!(demo_mode(Mode::Tmux, &plain), Mode::Tmux);
        // Inside tmux, detection's panes in the current window.
        let inside = terminal(Some("/tmp/tmux-1/default,1,0"), true);
        assert_eq!(demo_mode(Mode::Auto, &inside), Mode::Auto);
        // No tmux at all: detection's in-process.
        assert_eq!(demo_mode(Mode::Auto, &terminal(None, false)), Mode::Auto);
    }
}
