//! `roo-lead`: what it does with its flags ([`crate::flags::LeadArgs`]).
//!
//! Without `-p` on a terminal it starts the interactive REPL; with `-p PROMPT` (or
//! with stdin not a terminal and `-p -`) it runs once and prints the answer.

use std::io::IsTerminal;
use std::process::ExitCode;

use crate::entry::{self, Program};
use crate::exit::AppError;
use crate::flags::{LeadArgs, LeadCommand};
use crate::{headless, repl, setup};

/// Entry point of the `roo-lead` binary.
pub fn main() -> ExitCode {
    let program = Program {
        name: "roo-lead",
        takes_handoff: false,
    };
    entry::main(program, run)
}

fn run(args: LeadArgs) -> Result<ExitCode, AppError> {
    if let Some(LeadCommand::Demo(demo)) = &args.command {
        return crate::demo::run(&args, demo);
    }
    if args.print_backend {
        return print_backend(&args);
    }
    if args.print_sandbox {
        return print_sandbox(&args);
    }
    if args.rewind {
        return print_checkpoints(&args);
    }
    // Refused before anything is written; `join_as_lead` refuses every other path (a
    // resumed session that led a team) the same way.
    if let Some(team) = &args.team
        && let Some(why) = roo_agent::exec::sandbox::inside_agent_command()
    {
        let team =
            roo_store::Name::parse_as("team", team).map_err(|e| AppError::Usage(e.to_string()))?;
        return Err(AppError::Refused(
            roo_team::lead::JoinError::InsideCommand { team, why }.to_string(),
        ));
    }
    let interactive = args.prompt.is_none();
    if interactive && !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(AppError::Usage(
            "the interactive mode needs a terminal; pass -p \"PROMPT\" (or -p - to read stdin) for a one-shot run".to_string(),
        ));
    }
    entry::block_on(async move {
        let prompt = match &args.prompt {
            Some(p) if p == "-" => Some(read_stdin().await?),
            Some(p) => Some(p.clone()),
            None => None,
        };
        let mut built = setup::build(&args, interactive).await?;
        let spawner = built.spawner.clone();
        let team_slot = built.team.clone();
        let result = match prompt {
            Some(prompt) => {
                let options = headless::Options {
                    format: args.output_format,
                    verbose: args.verbose,
                    team_timeout: std::time::Duration::from_secs(args.team_timeout),
                };
                headless::run(&mut built, &prompt, options).await
            }
            None => {
                let context = built.agent.tool_context().clone();
                let result = repl::run(built).await;
                // A team the person leaves is said with what it holds, as a `-p` run does.
                if let Some(binding) = team_slot.get() {
                    let header = crate::left_team::left_header(binding.team.name());
                    let lines = crate::left_team::lines(binding.team.clone(), &context, header);
                    crate::left_team::print(&lines.await, crate::render::Style::for_stderr());
                }
                result
            }
        };
        // Pane teammates are processes of their own: shut them down (or keep them).
        spawner.shutdown(args.keep_panes).await;
        if args.keep_panes {
            // Kept teammates wait for a lead without end: this one leaves on purpose.
            roo_team::lead::release_lead(&team_slot).await;
        }
        result
    })?
}

/// `--print-backend`: the detection for this process's environment, as a report.
fn print_backend(args: &LeadArgs) -> Result<ExitCode, AppError> {
    use roo_team::backend::detect::{DetectEnv, detect};
    let team = args
        .team
        .as_deref()
        .map(|team| roo_store::Name::parse_as("team", team))
        .transpose()
        .map_err(|e| AppError::Usage(e.to_string()))?;
    let detection = detect(&DetectEnv::capture(args.teammate_mode))
        .map_err(|e| AppError::Usage(format!("teammates: {e}")))?;
    print!("{}", detection.report(team.as_ref().map(|t| t.as_ref())));
    Ok(ExitCode::SUCCESS)
}

/// `--rewind`: the checkpoints of this project's latest session (or `--resume ID`'s).
fn print_checkpoints(args: &LeadArgs) -> Result<ExitCode, AppError> {
    let cwd = match &args.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| AppError::Io(format!("failed to read the working directory: {e}")))?,
    };
    let cwd = std::fs::canonicalize(&cwd)
        .map_err(|e| AppError::Usage(format!("failed to open {}: {e}", cwd.display())))?;
    let root =
        roo_team::builder::detect_project_root(&cwd).map_err(|e| AppError::Usage(e.to_string()))?;
    let roo_home = crate::setup::roo_home()?;
    let sessions = roo_agent::project_sessions_dir(&roo_home, &root);
    let transcript = match &args.resume {
        Some(id) => roo_agent::session_path(&sessions, id),
        None => roo_agent::latest_session(&sessions),
    }
    .map_err(|e| AppError::Usage(e.to_string()))?;
    let id = transcript
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let checkpoints = roo_agent::Checkpoints::read(&roo_home, &root, &id)
        .map_err(|e| AppError::Usage(format!("failed to {e}")))?;
    println!("checkpoints of session {id} in {}", root.display());
    print!("{}", checkpoints.describe());
    println!(
        "rewind with: roo-lead --resume {id}, then /rewind N code|conversation|both (to before prompt N)"
    );
    Ok(ExitCode::SUCCESS)
}

fn print_sandbox(args: &LeadArgs) -> Result<ExitCode, AppError> {
    use roo_agent::config::{ConfigFiles, ProjectTrust};
    use roo_agent::exec::sandbox::{
        Layers, PolicyEnv, SandboxPolicy, home_sockets, removed_env_names,
    };
    let cwd =
        std::env::current_dir().map_err(|e| AppError::Io(format!("no working directory: {e}")))?;
    let roo_home = crate::setup::roo_home()?;
    let config = ConfigFiles::load(&roo_home, &cwd, ProjectTrust::Untrusted)
        .map_err(|e| AppError::Config(e.to_string()))?;
    let env = PolicyEnv::from_env(&roo_home);
    let settings = config
        .sandbox_settings(&cwd, env.home.as_deref(), args.no_sandbox)
        .map_err(|e| AppError::Config(e.to_string()))?;
    if !settings.enabled {
        println!(
            "sandbox: off ({}): commands run unconfined",
            settings
                .disabled_by
                .as_deref()
                .unwrap_or("by configuration")
        );
        return Ok(ExitCode::SUCCESS);
    }
    let helper = std::env::current_exe()
        .map_err(|e| AppError::Io(format!("cannot find this executable: {e}")))?;
    let layers = Layers::probe(&settings, &helper);
    for line in layers.describe() {
        println!("{line}");
    }
    if let Some(notice) = layers.notice() {
        println!("warning: {notice}");
    }
    let policy = SandboxPolicy::for_root(&cwd, &settings, &env);
    println!(
        "network: {}",
        if policy.network {
            "on (sandbox.network: false in your config turns TCP off)"
        } else {
            "TCP off"
        }
    );
    println!("write roots:");
    for path in policy.write.iter().filter(|p| p.exists()) {
        println!("  {}", path.display());
    }
    println!("hidden (namespaces) / unreadable (Landlock):");
    for path in policy.hide.iter().filter(|p| p.exists()) {
        println!("  {}", path.display());
    }
    let found = home_sockets::search(&policy.search, &policy.hide, &policy.write);
    let roots: Vec<String> = policy
        .search
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    println!(
        "sockets under {} (searched when each command starts, {} directories, {} levels deep{}):",
        roots.join(", "),
        found.dirs,
        home_sockets::SEARCH_DEPTH,
        match &found.cut_short {
            Some(why) => format!(
                "; cut short: {why}, so {} unsearched directories are hidden whole{}",
                found.unsearched.len(),
                if found.left_reachable > 0 {
                    format!(
                        " and {} (in or above a write root, or past {} covers) stay reachable",
                        found.left_reachable,
                        home_sockets::UNSEARCHED_COVERS
                    )
                } else {
                    String::new()
                }
            ),
            None => String::new(),
        }
    );
    let verb = if layers.namespaces.is_ok() {
        "hidden"
    } else {
        "reachable (no namespace layer)"
    };
    for socket in &found.sockets {
        println!("  {verb}: {}", socket.display());
    }
    for dir in &found.unsearched {
        println!("  {verb} (unsearched): {}", dir.display());
    }
    if found.sockets.is_empty() {
        println!("  none");
    }
    let removed = removed_env_names(&settings, &roo_home, None);
    println!(
        "environment removed from commands (names with KEY, TOKEN, SECRET, PASSWORD, PASSWD, \
         CREDENTIAL or AUTH, or a word PASS, PWD, PAT, CREDS, JWT, COOKIE or DSN; values \
         with a password in a URL or user:pw@host; sandbox.pass_env keeps one): {}",
        if removed.is_empty() {
            "none".to_string()
        } else {
            removed.join(" ")
        }
    );
    println!("a lead started inside an agent's command may not lead a team (--team is refused)");
    Ok(ExitCode::SUCCESS)
}

async fn read_stdin() -> Result<String, AppError> {
    use tokio::io::AsyncReadExt;
    let mut text = String::new();
    tokio::io::stdin()
        .read_to_string(&mut text)
        .await
        .map_err(|e| AppError::Io(format!("failed to read the prompt from stdin: {e}")))?;
    if text.trim().is_empty() {
        return Err(AppError::Usage("the prompt on stdin is empty".to_string()));
    }
    Ok(text)
}
