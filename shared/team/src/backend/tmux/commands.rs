//! The tmux command lines the executor issues, as plain functions (unit-tested), and
//! the parsing of tmux's answers. Each returns the arguments after the server
//! selection (`-L`/`-S`, `-f`), which [`super::Tmux`] adds.

use std::path::Path;

use super::TmuxError;
/// The worker's command line (shared with the iTerm2 backend).
pub use crate::backend::pane::worker_argv;
use crate::backend::ssh::command::tmux_arg;

/// What a placeholder pane runs until `respawn-pane` replaces it.
pub const PLACEHOLDER: &[&str] = &["sleep", "86400"];

/// The pane user option holding a teammate's colour ([`dress_pane`]).
pub const COLOR_OPTION: &str = "@roo-color";

/// A pane's border line: a teammate's pane shows its title (the teammate's name) in its
/// colour. Border styles are window options in tmux (`set-option -p pane-border-style`
/// lands on the whole window), so the colour is a pane user option the format reads; a
/// pane without one (the lead's, the user's) shows no title, as before the team came.
pub const BORDER_FORMAT: &str = "#{?@roo-color,#[fg=#{@roo-color}] #{pane_title} #[default],}";

/// The variable naming the credentials handoff file in the worker's environment.
pub use roo_agent::exec::sandbox::handoff::HANDOFF_ENV;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_string()).collect()
}

/// A new pane beside `target`'s, running the placeholder, in `dir`; prints its id.
pub fn split_window(target: &str, dir: &Path) -> Vec<String> {
    let mut args = strings(&["split-window", "-d", "-P", "-F", "#{pane_id}", "-t", target]);
    args.extend([
        "-c".to_string(),
        dir.display().to_string(),
        "--".to_string(),
    ]);
    args.extend(strings(PLACEHOLDER));
    args
}

/// Prints the id (`@N`) of the window holding `pane`.
pub fn window_of(pane: &str) -> Vec<String> {
    strings(&["display-message", "-p", "-t", pane, "#{window_id}"])
}

/// A new window right after `window`, not selected, running the placeholder in `dir`;
/// prints its pane id. For when the lead's window has no room for another pane.
pub fn new_window_after(window: &str, dir: &Path) -> Vec<String> {
    let mut args = strings(&[
        "new-window",
        "-a",
        "-d",
        "-P",
        "-F",
        "#{pane_id}",
        "-t",
        window,
    ]);
    args.extend([
        "-c".to_string(),
        dir.display().to_string(),
        "--".to_string(),
    ]);
    args.extend(strings(PLACEHOLDER));
    args
}

/// A detached session `name` whose first pane runs the placeholder; prints the pane id.
pub fn new_session(name: &str, dir: &Path) -> Vec<String> {
    let mut args = strings(&[
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        "200",
        "-y",
        "50",
        "-P",
        "-F",
        "#{pane_id}",
    ]);
    args.extend([
        "-c".to_string(),
        dir.display().to_string(),
        "--".to_string(),
    ]);
    args.extend(strings(PLACEHOLDER));
    args
}

/// Succeeds if session `name` exists (exact match).
pub fn has_session(name: &str) -> Vec<String> {
    strings(&["has-session", "-t", &format!("={name}")])
}

/// Title, colour (read by [`BORDER_FORMAT`]) and "stay open if the worker fails" for a
/// new pane: pane options only, which go away with the pane. Two independent tmux runs:
/// the title and then the colour in one sequence, so a coloured border never shows the
/// pane's default title; `remain-on-exit failed` apart (an older tmux refuses it, which
/// would end the sequence).
pub fn dress_pane(pane: &str, title: &str, color: &str) -> Vec<Vec<String>> {
    let mut named = strings(&["select-pane", "-t", pane, "-T"]);
    named.extend([tmux_arg(title), ";".to_string()]);
    named.extend(strings(&[
        "set-option",
        "-p",
        "-t",
        pane,
        COLOR_OPTION,
        color,
    ]));
    vec![
        strings(&["set-option", "-p", "-t", pane, "remain-on-exit", "failed"]),
        named,
    ]
}

/// Replaces the pane's placeholder with `argv`, run directly (no shell), in `dir`, with
/// only the handoff's socket and one-time token added to its environment — never a
/// secret. An argument ending in `;` is escaped ([`tmux_arg`]): tmux would take it for
/// the end of the command (a prompt `fix it;` made the spawn fail).
pub fn respawn_pane(pane: &str, dir: &Path, handoff: &str, argv: &[String]) -> Vec<String> {
    let mut args = strings(&["respawn-pane", "-k", "-t", pane]);
    args.extend([
        "-c".to_string(),
        tmux_arg(&dir.display().to_string()),
        "-e".to_string(),
        tmux_arg(&format!("{HANDOFF_ENV}={handoff}")),
        "--".to_string(),
    ]);
    args.extend(argv.iter().map(|a| tmux_arg(a)));
    args
}

/// [`respawn_pane`] then [`pane_pid`] as one tmux command sequence (one client run, not
/// two): it prints the pid of the worker it started; a failed respawn runs nothing after.
pub fn respawn_pane_and_pid(pane: &str, dir: &Path, handoff: &str, argv: &[String]) -> Vec<String> {
    let mut args = respawn_pane(pane, dir, handoff, argv);
    args.push(";".to_string());
    args.extend(pane_pid(pane));
    args
}

/// Prints the pid of the pane's process.
pub fn pane_pid(pane: &str) -> Vec<String> {
    strings(&["display-message", "-p", "-t", pane, "#{pane_pid}"])
}

/// Every pane of the server: id, pid, dead, title — tab-separated.
pub fn list_panes() -> Vec<String> {
    strings(&[
        "list-panes",
        "-a",
        "-F",
        "#{pane_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_title}",
    ])
}

/// Closes a pane.
pub fn kill_pane(pane: &str) -> Vec<String> {
    strings(&["kill-pane", "-t", pane])
}

/// The pane's visible text.
pub fn capture(pane: &str) -> Vec<String> {
    strings(&["capture-pane", "-p", "-t", pane])
}

/// The pane's last 200 lines, history included (a dead pane's last output scrolls into
/// the history when tmux prints "Pane is dead").
pub fn capture_history(pane: &str) -> Vec<String> {
    strings(&["capture-pane", "-p", "-S", "-200", "-t", pane])
}

/// Tiles the panes of `target`'s window.
pub fn tiled(target: &str) -> Vec<String> {
    strings(&["select-layout", "-t", target, "tiled"])
}

/// Sets a window option of `target`'s window.
pub fn set_window_option(target: &str, option: &str, value: &str) -> Vec<String> {
    strings(&["set-option", "-w", "-t", target, option, value])
}

/// Prints a window option's own value (empty if it inherits the global one).
pub fn show_window_option(target: &str, option: &str) -> Vec<String> {
    strings(&["show-options", "-w", "-v", "-t", target, option])
}

/// Prints an option's value as it applies to `target` (inherited or its own).
pub fn effective_option(target: &str, option: &str) -> Vec<String> {
    strings(&[
        "display-message",
        "-p",
        "-t",
        target,
        &format!("#{{{option}}}"),
    ])
}

/// Puts the window's border settings back: its own `pane-border-status` (`before`), or
/// inheritance if it had none; the title format is unset.
pub fn restore_border(target: &str, before: &str) -> Vec<Vec<String>> {
    let status = if before.is_empty() {
        strings(&["set-option", "-w", "-u", "-t", target, "pane-border-status"])
    } else {
        strings(&[
            "set-option",
            "-w",
            "-t",
            target,
            "pane-border-status",
            before,
        ])
    };
    vec![
        status,
        strings(&["set-option", "-w", "-u", "-t", target, "pane-border-format"]),
    ]
}

/// The pane id (`%N`) that `split-window`/`new-session -P -F '#{pane_id}'` printed.
pub fn pane_id(out: &str, command: &str) -> Result<String, TmuxError> {
    let id = out.trim();
    if id.starts_with('%') && id.len() > 1 && id[1..].bytes().all(|b| b.is_ascii_digit()) {
        Ok(id.to_string())
    } else {
        Err(TmuxError::Answer {
            args: command.to_string(),
            answer: out.to_string(),
        })
    }
}

/// One line of [`list_panes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneState {
    pub id: String,
    pub pid: Option<u32>,
    pub dead: bool,
    pub title: String,
}

/// Parses [`list_panes`]' output; malformed lines are skipped.
pub fn parse_pane_list(out: &str) -> Vec<PaneState> {
    out.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, '\t');
            let id = fields.next()?.to_string();
            let pid = fields.next()?.parse().ok();
            let dead = fields.next()? == "1";
            let title = fields.next().unwrap_or_default().to_string();
            id.starts_with('%').then_some(PaneState {
                id,
                pid,
                dead,
                title,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::PathBuf;

    use roo_agent::permissions::PermissionMode;
    use roo_store::{Member, Name, RooHome, Team};

    use super::*;
    use crate::backend::Launch;
    use crate::settings::{AgentSettings, Identity};

    #[test]
    fn a_pane_is_split_with_a_placeholder_and_respawned_with_the_worker_and_no_secret() {
        assert_eq!(
            split_window("%0", Path::new("/w/t")).join(" "),
            "split-window -d -P -F #{pane_id} -t %0 -c /w/t -- sleep 86400"
        );
        let argv = vec!["/bin/roo-worker".to_string(), "--team".into(), "t".into()];
        assert_eq!(
            respawn_pane("%3", Path::new("/w"), "/h/run/handoff/x.sock#00ff", &argv).join(" "),
            "respawn-pane -k -t %3 -c /w -e ROO_ENV_HANDOFF=/h/run/handoff/x.sock#00ff -- \
             /bin/roo-worker --team t"
        );
        let argv = vec!["/bin/roo-worker".to_string(), "--prompt=fix it;".into()];
        assert_eq!(
            respawn_pane("%3", Path::new("/w"), "/s#0", &argv)
                .last()
                .unwrap(),
            "--prompt=fix it\\;"
        );
        // Started and asked for its pid in one run: the only bare `;` is the separator,
        // so an argument ending in `;` cannot end the respawn early.
        let both = respawn_pane_and_pid("%3", Path::new("/w"), "/s#0", &argv);
        assert_eq!(both.iter().filter(|a| *a == ";").count(), 1, "{both:?}");
        assert_eq!(
            both.join(" "),
            "respawn-pane -k -t %3 -c /w -e ROO_ENV_HANDOFF=/s#0 -- /bin/roo-worker \
             --prompt=fix it\\; ; display-message -p -t %3 #{pane_pid}"
        );
        assert_eq!(
            dress_pane("%3", "alice", "blue")
                .iter()
                .map(|a| a.join(" "))
                .collect::<Vec<_>>(),
            [
                "set-option -p -t %3 remain-on-exit failed",
                "select-pane -t %3 -T alice ; set-option -p -t %3 @roo-color blue",
            ]
        );
        assert_eq!(
            new_session("roo-crew", Path::new("/w")).join(" "),
            "new-session -d -s roo-crew -x 200 -y 50 -P -F #{pane_id} -c /w -- sleep 86400"
        );
        assert_eq!(
            has_session("roo-crew").join(" "),
            "has-session -t =roo-crew"
        );
        assert_eq!(
            new_window_after("@1", Path::new("/w")).join(" "),
            "new-window -a -d -P -F #{pane_id} -t @1 -c /w -- sleep 86400"
        );
        assert_eq!(
            effective_option("%0", "pane-border-status").join(" "),
            "display-message -p -t %0 #{pane-border-status}"
        );
        let restore = |before| {
            restore_border("%0", before)
                .iter()
                .map(|a| a.join(" "))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            restore(""),
            [
                "set-option -w -u -t %0 pane-border-status",
                "set-option -w -u -t %0 pane-border-format"
            ]
        );
        assert_eq!(
            restore("off")[0],
            "set-option -w -t %0 pane-border-status off"
        );
    }

    #[test]
    fn pane_ids_and_listings_are_parsed_strictly() {
        assert_eq!(pane_id("%12\n", "split-window").unwrap(), "%12");
        assert!(pane_id("", "split-window").is_err());
        assert!(pane_id("%x", "split-window").is_err());
        let panes = parse_pane_list("%0\t100\t0\tlead\n%1\t101\t1\talice\tx\ngarbage\n");
        assert_eq!(
            panes,
            [
                PaneState {
                    id: "%0".into(),
                    pid: Some(100),
                    dead: false,
                    title: "lead".into()
                },
                PaneState {
                    id: "%1".into(),
                    pid: Some(101),
                    dead: true,
                    title: "alice\tx".into()
                },
            ]
        );
    }

    #[test]
    fn the_worker_gets_identity_flags_and_never_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let t = Name::parse("crew").unwrap();
        let team = Team::create(
            &RooHome::new(dir.path()),
            t.clone(),
            "",
            Member::new(Name::parse("lead").unwrap(), &t),
            Vec::new(),
        )
        .unwrap();
        let mut settings = AgentSettings::new(
            Identity::solo(Name::parse("alice").unwrap()),
            dir.path().to_path_buf(),
        );
        settings.permission_mode = Some(PermissionMode::AcceptEdits);
        settings.trust = crate::trust::Trust::Granted;
        settings.llm.provider = Some("openai".into());
        settings.llm.base_url = Some("http://127.0.0.1:9/v1".into());
        settings.config_root = Some(PathBuf::from("/repo"));
        let launch = Launch {
            team,
            name: Name::parse("alice").unwrap(),
            lead: Name::parse("lead").unwrap(),
            prompt: "Claim task 1.".into(),
            settings,
            plan_mode_required: true,
            mode_after_plan: PermissionMode::AcceptEdits,
            agent_type: Some("Explore".into()),
            model: Some("m2".into()),
            work_dir: PathBuf::from("/repo/.roocode/worktrees/crew+alice"),
            color: None,
            tools: Vec::new(),
            lead_key: None,
            member_login: None,
        };
        let argv = worker_argv(Path::new("/bin/roo-worker"), &launch, "green").join(" ");
        assert_eq!(
            argv,
            format!(
                "/bin/roo-worker --team crew --name alice --agent-id=alice@crew \
                 --agent-type=Explore --color=green --lead=lead --permission-mode=acceptEdits \
                 --provider=openai --model=m2 --base-url=http://127.0.0.1:9/v1 \
                 --cwd=/repo/.roocode/worktrees/crew+alice --config-root=/repo --max-turns={} \
                 --plan-mode-required --trust-project",
                launch.settings.max_turns
            )
        );
        assert!(!argv.to_ascii_lowercase().contains("key"), "{argv}");
        // The prompt goes through the handoff, never the command line.
        assert!(!argv.contains("Claim task"), "{argv}");
    }
}
