//! macOS: the policy as a Seatbelt (SBPL) profile for `sandbox-exec`.
//!
//! Everything is allowed except writing outside the writable paths (contents and
//! metadata: mode, owner, times, extended attributes, flags), reading the denied
//! paths, reaching the hidden paths (reading them, writing them, connecting to a
//! UNIX socket beneath them) and, with the network off, outbound connections and
//! binds. Compiled on every platform so the profile is unit-tested where it cannot
//! run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::SandboxPolicy;

/// The Seatbelt front end shipped with macOS.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The metadata writes: `chmod`, `chown`, `utimes`, `setxattr`, `chflags`, ACLs
/// and set-id bits. `file-write*` already covers them — an operation name ending
/// in `*` stands for every operation with that prefix, and libsandbox's
/// `file-write-…` operations are `-acl`, `-create`, `-data`, `-flags`, `-mode`,
/// `-owner`, `-setugid`, `-times`, `-unlink` and `-xattr` (Mozilla bug 1379182)
/// — but they are named in both the deny and the allow so the profile states
/// what Landlock cannot (it has no right for metadata) and a reader need not
/// know the wildcard rule.
const METADATA_WRITES: &str = "file-write-mode file-write-owner file-write-times \
                               file-write-xattr file-write-flags file-write-acl \
                               file-write-setugid";

/// The SBPL profile for `policy`. Paths are taken as given (the caller passes
/// canonical paths: on macOS `/tmp` is `/private/tmp`).
///
/// Later rules win in SBPL: the writable allow follows the blanket write
/// denies, and the denials of secrets and hidden paths follow the allow.
pub fn seatbelt_profile(policy: &SandboxPolicy) -> String {
    let mut profile =
        format!("(version 1)\n(allow default)\n(deny file-write*)\n(deny {METADATA_WRITES})\n");
    let writable: Vec<String> = policy.write.iter().map(|p| filter(p)).collect();
    if !writable.is_empty() {
        profile.push_str(&format!(
            "(allow file-write* {METADATA_WRITES}\n  {})\n",
            writable.join("\n  ")
        ));
    }
    let denied: Vec<String> = policy.deny_read.iter().map(|p| filter(p)).collect();
    if !denied.is_empty() {
        profile.push_str(&format!("(deny file-read*\n  {})\n", denied.join("\n  ")));
    }
    // What the namespace layer covers on Linux: sockets that run commands
    // outside the sandbox or hold keys (tmux, D-Bus, Docker, the SSH agent),
    // secrets, the agent's state. Seatbelt checks a UNIX socket `connect` as
    // `network-outbound` against the socket's path, not as a file read, so both
    // are denied; `(remote unix-socket (subpath …))` — the form Codex's profile
    // uses — covers a socket's directory and a socket file alike.
    // Writes are denied too, even beneath a writable temp dir, so a command
    // cannot replace a server's socket with its own.
    let hidden: Vec<String> = policy.hide.iter().map(|p| filter(p)).collect();
    if !hidden.is_empty() {
        let sockets: Vec<String> = hidden
            .iter()
            .map(|f| format!("(remote unix-socket {f})"))
            .collect();
        profile.push_str(&format!(
            "(deny file-read* file-write*\n  {})\n(deny network-outbound\n  {})\n",
            hidden.join("\n  "),
            sockets.join("\n  ")
        ));
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
