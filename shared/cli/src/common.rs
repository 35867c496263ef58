//! What `roo-mail` and `roo-task` share: the global flags (`--team`, `--as`, `--json`),
//! resolving them against the environment, the command line with its help naming the
//! program it is shown in, and the `main` wrapper that turns results into exit codes.

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Command, CommandFactory, Parser};
use roo_store::{Name, RooHome, Team};

use crate::exit::{CliError, CliResult};
use crate::output::Style;

/// Flags every command accepts.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Common {
    /// Team to work on [default: $ROO_TEAM]
    #[arg(long, global = true, value_name = "TEAM")]
    pub team: Option<String>,

    /// Act as this member [default: $ROO_AGENT_NAME]
    #[arg(
        long = "as",
        visible_alias = "from",
        global = true,
        value_name = "NAME"
    )]
    pub agent: Option<String>,

    /// Print machine-readable JSON
    #[arg(long, global = true)]
    pub json: bool,
}

/// The environment a command runs in (kept apart so tests can pass their own).
#[derive(Debug, Clone)]
pub struct Context {
    /// `roo-mail` or `roo-task`: the CLI whose commands messages name.
    pub program: &'static str,
    /// Global flags.
    pub common: Common,
    /// Output style.
    pub style: Style,
}

fn env_nonempty(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// Set once a command asked for `--json`: warnings on stderr are then JSON lines too.
static JSON_OUTPUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The team's quarantined files found by this process, for the `--json` warning line.
static QUARANTINED: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

impl Context {
    /// Flags plus the environment, for `program`.
    pub fn new(program: &'static str, common: Common) -> Context {
        if common.json {
            JSON_OUTPUT.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Context {
            program,
            common,
            style: Style::for_stdout(),
        }
    }

    /// `$ROO_HOME` (default `~/.roocode`).
    pub fn home(&self) -> CliResult<RooHome> {
        Ok(RooHome::from_env()?)
    }

    /// The team name from `--team` or `$ROO_TEAM`.
    pub fn team_name(&self) -> CliResult<Name> {
        let raw = self
            .common
            .team
            .clone()
            .or_else(|| env_nonempty("ROO_TEAM"))
            .ok_or_else(|| {
                CliError::Usage("pick a team: pass --team TEAM or set ROO_TEAM".into())
            })?;
        Ok(Name::parse_as("team name", &raw)?)
    }

    /// The existing team (refuses one that does not exist). Reports the team's
    /// quarantined files on stderr, once per process.
    pub fn team(&self) -> CliResult<Team> {
        let (home, name, program) = (self.home()?, self.team_name()?, self.program);
        static REPORTED: std::sync::Once = std::sync::Once::new();
        REPORTED.call_once(|| {
            // A failure to look is the command's own to report (it reads the same store).
            let found = roo_store::quarantine::quarantined(&home, &name).unwrap_or_default();
            for path in &found {
                roo_store::quarantine::warn_later(format!(
                    "quarantined data at {}; inspect it, then run `{program} doctor --team \
                     {name} --acknowledge`",
                    path.display()
                ));
            }
            if let Ok(mut q) = QUARANTINED.lock() {
                *q = found;
            }
        });
        Ok(Team::open(&home, name)?)
    }

    /// The member name from `--as`/`--from` or `$ROO_AGENT_NAME`.
    pub fn agent(&self) -> CliResult<Name> {
        self.agent_opt()?.ok_or_else(|| {
            CliError::Usage(
                "say who you are: pass --as NAME (or --from NAME) or set ROO_AGENT_NAME".into(),
            )
        })
    }

    /// The member name, if given.
    pub fn agent_opt(&self) -> CliResult<Option<Name>> {
        match self
            .common
            .agent
            .clone()
            .or_else(|| env_nonempty("ROO_AGENT_NAME"))
        {
            Some(raw) => Ok(Some(Name::parse_as("member name", &raw)?)),
            None => Ok(None),
        }
    }

    /// Whether to print JSON.
    pub fn json(&self) -> bool {
        self.common.json
    }
}

/// The longest duration a seconds flag accepts: one year.
pub const MAX_SECONDS: u64 = 365 * 24 * 3600;

/// Parses a seconds flag (`--timeout 2.5`): a finite, non-negative number of seconds up to
/// [`MAX_SECONDS`]. `inf`, `NaN`, negative or huge values are usage errors (exit 2), never
/// a panic.
pub fn parse_seconds(raw: &str) -> Result<Duration, String> {
    let secs: f64 = raw
        .trim()
        .parse()
        .map_err(|_| format!("{raw:?} is not a number of seconds"))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!(
            "{raw:?} is not a finite, non-negative number of seconds"
        ));
    }
    if secs > MAX_SECONDS as f64 {
        return Err(format!(
            "{raw:?} seconds is more than the maximum of {MAX_SECONDS} (one year)"
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{raw:?}: {e}"))
}

/// Stands for the program's name in the help of commands both CLIs have (`team …`).
pub const PROGRAM: &str = "{program}";

/// The command line of `C` as `program` shows it: [`PROGRAM`] in any command's
/// after-help (its examples) replaced by `program`, so each CLI's help speaks of itself.
pub fn command<C: CommandFactory>(program: &str) -> Command {
    fn name(cmd: Command, program: &str) -> Command {
        let cmd = match cmd.get_after_help().map(ToString::to_string) {
            Some(text) if text.contains(PROGRAM) => cmd.after_help(text.replace(PROGRAM, program)),
            _ => cmd,
        };
        let subcommands: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        subcommands.iter().fold(cmd, |cmd, sub| {
            cmd.mut_subcommand(sub, |s| name(s, program))
        })
    }
    name(C::command(), program)
}

/// Parses `args` as `C` and runs it; turns the outcome into an exit code. Before
/// parsing: the relay checks (a command of an agent's shell goes through its agent);
/// after running: the store's warnings, printed before any error line.
pub fn main_with<C: Parser>(
    program: &str,
    args: impl IntoIterator<Item = OsString>,
    run: impl FnOnce(C) -> CliResult,
) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    if !roo_store::relay::bound_to_relaying_agent() {
        return ExitCode::from(crate::exit::REFUSED);
    }
    if let Some(code) = crate::forward::if_relayed(program, &args) {
        return code;
    }
    crate::entry::run(program, command::<C>(program), args, |cli| {
        let result = run(cli).and_then(|()| io::stdout().flush().map_err(CliError::from));
        print_warnings(program);
        result.map(|()| ExitCode::SUCCESS)
    })
}

/// The store's warnings of this run on stderr: one line each, or with `--json` one JSON
/// line in all.
fn print_warnings(program: &str) {
    let warnings = roo_store::quarantine::take_warnings();
    if JSON_OUTPUT.load(std::sync::atomic::Ordering::Relaxed) {
        // One JSON line on stderr, so a script reading `--json` output learns of damaged
        // data without the shape of stdout changing.
        let quarantined = QUARANTINED.lock().map(|q| q.clone()).unwrap_or_default();
        if !warnings.is_empty() || !quarantined.is_empty() {
            let line = crate::shape::Warnings {
                program,
                warnings: &warnings,
                quarantined: &quarantined,
            };
            if let Ok(line) = serde_json::to_string(&line) {
                eprintln!("{line}");
            }
        }
    } else {
        for warning in warnings {
            eprintln!("{program}: warning: {warning}");
        }
    }
}

/// `doctor`: lists the team's quarantined files, or acknowledges them (renamed to
/// `<name>.acknowledged`, which ends the warnings; the files are kept). On the PostgreSQL
/// store it also shows the presence connection's keepalive settings as the server applies
/// them, whether the death of a member is seen in seconds, and whether the store's login
/// may create member roles.
pub fn doctor(ctx: &Context, acknowledge: bool, out: &mut impl Write) -> CliResult {
    let (home, team) = (ctx.home()?, ctx.team_name()?);
    let found = roo_store::quarantine::quarantined(&home, &team)?;
    let acknowledged = if acknowledge {
        roo_store::quarantine::acknowledge(&home, &team)?
    } else {
        Vec::new()
    };
    // A task list missing as damage (the team exists, no quarantined copy explains it);
    // `--acknowledge` starts an empty one. A team without a config has no list to judge.
    let task_list = match roo_store::Team::open(&home, team.clone()) {
        Ok(opened) if opened.tasks().is_missing()? => {
            Some(if acknowledge && opened.tasks().restore_missing()? {
                "restored"
            } else {
                "missing"
            })
        }
        _ => None,
    };
    let presence = match home.pg() {
        Some(pg) => Some(pg.presence_settings()?),
        None => None,
    };
    let unverified = home.pg().and_then(roo_store::PgStore::unverified_tls);
    let member_roles = match home.pg() {
        Some(pg) => Some((
            pg.member_roles_unavailable()?,
            roo_store::MemberRoles::of_user_config(home.root())?,
        )),
        None => None,
    };
    if ctx.json() {
        crate::output::print_json(
            out,
            &crate::shape::Quarantine {
                quarantined: &found,
                acknowledged: &acknowledged,
                task_list,
                presence: presence.as_ref().map(crate::shape::Presence::of),
            },
        )?;
        return Ok(());
    }
    if found.is_empty() {
        writeln!(out, "no quarantined data in team {team}")?;
    } else if acknowledge {
        for path in &acknowledged {
            writeln!(out, "acknowledged {}", path.display())?;
        }
    } else {
        for path in &found {
            writeln!(out, "quarantined {}", path.display())?;
        }
        writeln!(
            out,
            "inspect these files and restore what you need, then run `{} doctor --acknowledge`",
            ctx.program
        )?;
    }
    match task_list {
        Some("restored") => writeln!(
            out,
            "started an empty task list for team {team}: the missing list's tasks are lost"
        )?,
        Some(_) => writeln!(
            out,
            "the task list of team {team} is missing (deleted outside roo): restore it from a \
             backup, or run `{} doctor --acknowledge` to start an empty one",
            ctx.program
        )?,
        None => {}
    }
    if let Some(settings) = &presence {
        let shown: Vec<String> = settings
            .server
            .iter()
            .map(|(name, value)| format!("{name}={}", value.as_deref().unwrap_or("(none)")))
            .collect();
        writeln!(
            out,
            "presence connection ({}): {}",
            if settings.unix_socket {
                "unix socket"
            } else {
                "TCP"
            },
            shown.join(" ")
        )?;
        writeln!(out, "death detection: {}", settings.verdict())?;
    }
    match member_roles {
        Some((None, setting)) => writeln!(
            out,
            "member roles: this login may create them; member_roles: {setting} (your config): {}",
            if setting == roo_store::MemberRoles::Off {
                "teammates use this login"
            } else {
                "each teammate in a pane or on another host gets a role of its own \
                 (docs/DISTRIBUTED.md)"
            }
        )?,
        Some((Some(why), setting)) => writeln!(
            out,
            "member roles: not here: {why}; member_roles: {setting} (your config): {}",
            if setting == roo_store::MemberRoles::Required {
                "spawning a teammate in a pane or on another host fails"
            } else {
                "teammates use this login, and every check is the client's"
            }
        )?,
        None => {}
    }
    if let Some(why) = unverified {
        writeln!(
            out,
            "warning: the store URL's {why}: a teammate on another host given it can be \
             read and impersonated by anyone on the network path; use sslmode=verify-full \
             with sslrootcert=<the server's CA> (the default when sslmode is not written)"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The long help of `cmd` and of every subcommand below it, by command path.
    fn every_help(cmd: &mut Command, path: &str, out: &mut Vec<(String, String)>) {
        out.push((path.to_owned(), cmd.render_long_help().to_string()));
        for sub in cmd.get_subcommands_mut() {
            let path = format!("{path} {}", sub.get_name());
            every_help(sub, &path, out);
        }
    }

    /// Each CLI's help, subcommands included, speaks of itself only: its examples name
    /// it, never the other CLI, and no placeholder is left.
    #[test]
    fn each_help_names_only_its_own_program() {
        for (program, other, mut cmd) in [
            (
                "roo-mail",
                "roo-task",
                command::<crate::mail::MailCli>("roo-mail"),
            ),
            (
                "roo-task",
                "roo-mail",
                command::<crate::task::TaskCli>("roo-task"),
            ),
        ] {
            cmd.build();
            let mut helps = Vec::new();
            every_help(&mut cmd, program, &mut helps);
            assert!(helps.len() > 10, "{program}: {} helps", helps.len());
            for (path, help) in &helps {
                assert!(
                    !help.contains(other),
                    "`{path} --help` names {other}:\n{help}"
                );
                assert!(!help.contains(PROGRAM), "`{path} --help`:\n{help}");
            }
            let create = &helps
                .iter()
                .find(|(path, _)| path.ends_with(" team create"))
                .unwrap_or_else(|| panic!("{program} has no `team create`"))
                .1;
            assert!(
                create.contains(&format!("{program} team create --team demo")),
                "{create}"
            );
        }
    }

    #[test]
    fn seconds_flags_refuse_inf_nan_negative_and_huge_values() {
        for bad in ["inf", "-inf", "NaN", "-1", "1e300", "31536001", "", "x"] {
            assert!(parse_seconds(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(parse_seconds("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        assert_eq!(
            parse_seconds("31536000"),
            Ok(Duration::from_secs(MAX_SECONDS))
        );
    }
}
