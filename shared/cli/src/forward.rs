//! The command side of the relay: `roo-mail` and `roo-task` run inside an agent's
//! confined command hand their invocation to that agent instead of touching the store.
//!
//! Kept apart from [`crate::relay`] (the agent side, which parses and checks the
//! forwarded arguments against every CLI's commands) so that the start-up every CLI
//! shares ([`crate::common::main_with`]) depends on the wire only, not on the CLIs.

use std::ffi::OsString;
use std::process::ExitCode;

use roo_store::relay::{self, Reply, Request};

use crate::exit::{IO, REFUSED, USAGE};

/// Sends this invocation to the agent if the process runs inside an agent's
/// command; `None` otherwise (the CLI then works on the store itself).
pub(crate) fn if_relayed(program: &str, args: &[OsString]) -> Option<ExitCode> {
    let fd = relay::inherited()?;
    let mut strings = Vec::new();
    for arg in args.iter().skip(1) {
        match arg.to_str() {
            Some(s) => strings.push(s.to_string()),
            None => {
                eprintln!("{program}: arguments must be UTF-8 inside an agent's command");
                return Some(ExitCode::from(USAGE));
            }
        }
    }
    let request = Request {
        program: program.to_string(),
        args: strings,
        cwd: std::env::current_dir().unwrap_or_default(),
    };
    Some(match relay::forward(&fd, &request) {
        Ok(Reply::Exited(code)) => ExitCode::from(u8::try_from(code).unwrap_or(REFUSED)),
        Ok(Reply::Refused(why)) => {
            eprintln!("{program}: {why}");
            ExitCode::from(REFUSED)
        }
        Err(e) => {
            eprintln!("{program}: could not reach the agent that runs this command: {e}");
            ExitCode::from(IO)
        }
    })
}
