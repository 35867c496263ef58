//! `roo-worker --serve-handoff LABEL`: the far end of a lead's handoff to a teammate on
//! another host (docs/BACKENDS.md "The ssh backend"). A hidden helper mode, run by the
//! lead over ssh, never by a person.
//!
//! It reads `{"env": {NAME: value, …}, "launch": {…}}` (the lead's secrets: API keys,
//! `ROO_STORE`, `PGPASSWORD`; the worker's prompt and the project config the lead read in
//! its own tree) from stdin — never from its command line — merges the env over this host's
//! own environment (the lead's values win), offers the result on a private one-time
//! socket under this host's `ROO_HOME` (`run/handoff`, mode 0700; the same handoff a
//! local pane worker takes, `roo_agent::exec::sandbox::handoff`), prints the `ROO_ENV_HANDOFF`
//! value as its first line, and keeps serving until the worker took it (exit 0) or
//! `START_TIMEOUT` passed (exit 1). Bad input is exit 2, a handoff it cannot offer exit 3.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use roo_agent::exec::sandbox::handoff::{current_env_for_handoff, offer_handoff};
use roo_team::backend::pane::{START_TIMEOUT, handoff_dir};

use crate::exit;

/// Largest environment read from stdin.
const MAX_INPUT: u64 = 1024 * 1024;

/// Runs the mode with `args` (what follows the flag: the label).
pub fn run(args: &[std::ffi::OsString]) -> ExitCode {
    match serve(args) {
        Ok(code) => ExitCode::from(code),
        Err((code, message)) => {
            eprintln!("roo-worker: {message}");
            ExitCode::from(code)
        }
    }
}

fn serve(args: &[std::ffi::OsString]) -> Result<u8, (u8, String)> {
    let usage = |m: String| (exit::USAGE, m);
    let [label] = args else {
        return Err(usage(
            "--serve-handoff takes one argument, the label (it is run by a lead over ssh)".into(),
        ));
    };
    let label = label
        .to_str()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| usage("--serve-handoff: the label is empty or not UTF-8".into()))?;
    let mut input = Vec::new();
    std::io::stdin()
        .take(MAX_INPUT + 1)
        .read_to_end(&mut input)
        .map_err(|e| {
            (
                exit::IO,
                format!("failed to read the environment from stdin: {e}"),
            )
        })?;
    if input.len() as u64 > MAX_INPUT {
        return Err(usage(
            "--serve-handoff: the environment is larger than 1 MiB".into(),
        ));
    }
    let bad_input = |why: String| {
        usage(format!(
            "--serve-handoff: stdin is not {{\"env\": {{NAME: value}}, \"launch\": {{…}}}}: {why}"
        ))
    };
    let value: serde_json::Value =
        serde_json::from_slice(&input).map_err(|e| bad_input(e.to_string()))?;
    let object = value.as_object();
    let launch = object.and_then(|o| o.get("launch")).cloned();
    let Some(vars) = object
        .filter(|o| o.keys().all(|k| k == "env" || k == "launch"))
        .and_then(|o| o.get("env"))
        .and_then(serde_json::Value::as_object)
    else {
        return Err(bad_input("not that shape".into()));
    };
    let mut lead_env = BTreeMap::new();
    for (name, value) in vars {
        let Some(value) = value.as_str() else {
            return Err(bad_input(format!("the value of {name:?} is not a string")));
        };
        lead_env.insert(name.clone(), value.to_string());
    }
    if let Some(bad) = lead_env
        .iter()
        .find(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0'))
    {
        return Err(usage(format!(
            "--serve-handoff: invalid variable {:?}",
            bad.0
        )));
    }
    let root = roo_store::root_from_env().map_err(|e| usage(e.to_string()))?;
    let mut env = current_env_for_handoff();
    env.extend(lead_env);
    let offer = offer_handoff(
        &handoff_dir(&root),
        label,
        &env,
        launch.as_ref(),
        START_TIMEOUT,
    )
    .map_err(|e| (exit::IO, format!("failed to {e}")))?;
    let mut out = std::io::stdout();
    writeln!(out, "{}", offer.env_value)
        .and_then(|()| out.flush())
        .map_err(|e| (exit::IO, format!("failed to print the handoff: {e}")))?;
    // The serving thread removes the socket once the worker took it, or at its deadline.
    let start = Instant::now();
    while offer.socket.exists() && start.elapsed() < START_TIMEOUT + Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if start.elapsed() >= START_TIMEOUT {
        let _ = std::fs::remove_file(&offer.socket);
        return Err((
            exit::NOT_COMPLETED,
            format!(
                "nobody took the handoff within {} s",
                START_TIMEOUT.as_secs()
            ),
        ));
    }
    Ok(exit::OK)
}
