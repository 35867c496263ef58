//! macOS: the policy as a Seatbelt (SBPL) profile for `sandbox-exec`.
//!
//! Everything is allowed except writing outside the writable paths, reading the
//! denied paths and, with the network off, outbound connections and binds. Compiled on every
//! platform so the profile is unit-tested where it cannot run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::SandboxPolicy;

/// The Seatbelt front end shipped with macOS.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The SBPL profile for `policy`. Paths are taken as given (the caller passes
/// canonical paths: on macOS `/tmp` is `/private/tmp`).
pub fn seatbelt_profile(policy: &SandboxPolicy) -> String {
    let mut profile = String::from("(version 1)\n(allow default)\n(deny file-write*)\n");
    let writable: Vec<String> = policy.write.iter().map(|p| filter(p)).collect();
    if !writable.is_empty() {
        profile.push_str(&format!(
            "(allow file-write*\n  {})\n",
            writable.join("\n  ")
        ));
    }
    let denied: Vec<String> = policy.deny_read.iter().map(|p| filter(p)).collect();
    if !denied.is_empty() {
        profile.push_str(&format!("(deny file-read*\n  {})\n", denied.join("\n  ")));
    }
    if !policy.network {
        // Every outbound connection and bind, UNIX sockets included: stricter
        // than Landlock's TCP-only rule, and free of filter syntax that
        // differs between macOS releases.
        profile.push_str("(deny network-outbound)\n(deny network-bind)\n");
    }
    profile
}

/// `sandbox-exec -p PROFILE PROGRAM ARGS...`.
pub fn seatbelt_command(
    policy: &SandboxPolicy,
    program: &Path,
    args: &[OsString],
) -> (PathBuf, Vec<OsString>) {
    let mut argv = vec![
        OsString::from("-p"),
        OsString::from(seatbelt_profile(policy)),
    ];
    argv.push(program.as_os_str().to_os_string());
    argv.extend(args.iter().cloned());
    (PathBuf::from(SANDBOX_EXEC), argv)
}

/// `(subpath "...")`: the path and everything beneath (a file matches itself).
/// Seatbelt matches resolved paths, so existing paths are canonicalised
/// (`/tmp` is `/private/tmp` on macOS).
fn filter(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    format!("(subpath {})", quote(&path.to_string_lossy()))
}

/// An SBPL string literal.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
