//! Linux: the policy as a Landlock ruleset the helper applies to itself.
//!
//! Landlock grants access by file hierarchy and cannot subtract a subtree from
//! a grant, so "read everything except ~/.ssh" is built as: list-directory
//! rights on `/` (names stay visible everywhere), and read/execute rights on
//! every entry along the way that is not a denied path nor an ancestor of one
//! — the ancestors are descended into and their other entries granted one by
//! one ([`read_grants`]). Entries created later directly inside such an
//! ancestor (say, a new file in `~` next to `~/.ssh`) are not readable in that
//! command; everything beneath a granted entry is. Symbolic links need no rule:
//! Landlock checks the file they resolve to.
//!
//! Writes (create, delete, rename, truncate, device ioctls) are granted beneath
//! the policy's writable paths. With the network off, TCP bind and connect are
//! refused (Landlock ABI 4, Linux 6.7; UDP and UNIX sockets are not covered).
//! Signals to processes outside the sandbox are refused (ABI 6, Linux 6.12), so
//! a command cannot kill the agent or the user's other programs. On an older
//! kernel the missing parts are skipped and reported as partial enforcement.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::SandboxPolicy;
use super::helper::Enforcement;

/// The newest ABI whose rights this ruleset was written and tested against.
const ABI_TARGET: ABI = ABI::V6;

/// Whether this kernel enforces Landlock; `Ok` names the mechanism.
pub(crate) fn probe() -> Result<&'static str, String> {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create())
        .map(|_| "Landlock")
        .map_err(|e| format!("this kernel does not provide Landlock ({e})"))
}

/// The rules a policy turns into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Read and execute granted beneath each.
    pub(crate) read: Vec<PathBuf>,
    /// Writes granted beneath each (existing writable paths).
    pub(crate) write: Vec<PathBuf>,
}

/// Why a ruleset could not be built; the command is then not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LandlockError {
    #[error("list {path} to build the sandbox's read rules: {source}")]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("build the Landlock ruleset: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("open a path for the Landlock ruleset: {0}")]
    Path(#[from] landlock::PathFdError),
}

/// Computes the rules for `policy` from the file system as it is now.
pub(crate) fn plan(policy: &SandboxPolicy) -> Result<Plan, LandlockError> {
    let denied: Vec<PathBuf> = policy
        .deny_read
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let write = policy
        .write
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    Ok(Plan {
        read: read_grants(&denied)?,
        write,
    })
}

/// Entries to grant read on so that everything but `denied` (canonical paths)
/// is readable.
pub(crate) fn read_grants(denied: &[PathBuf]) -> Result<Vec<PathBuf>, LandlockError> {
    let root = PathBuf::from("/");
    if denied.iter().any(|d| d == &root) {
        return Ok(Vec::new());
    }
    if denied.is_empty() {
        return Ok(vec![root]);
    }
    let mut grants = Vec::new();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| LandlockError::List {
            path: dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| LandlockError::List {
                path: dir.clone(),
                source,
            })?;
            let path = entry.path();
            if denied.contains(&path) {
                continue;
            }
            if denied.iter().any(|d| d.starts_with(&path)) {
                // A real directory: `denied` holds canonical paths.
                stack.push(path);
            } else if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                grants.push(path);
            }
        }
    }
    grants.sort();
    Ok(grants)
}

/// Confines the calling thread (and the processes it starts) to `policy`.
pub(crate) fn apply(policy: &SandboxPolicy) -> Result<Enforcement, LandlockError> {
    let plan = plan(policy)?;
    let abi = ABI_TARGET;
    let read: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::Execute;
    let write = AccessFs::from_write(abi);
    let file_rights = AccessFs::from_file(abi);

    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)?;
    if !policy.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    let mut created = ruleset
        .create()?
        .add_rule(PathBeneath::new(PathFd::new("/")?, AccessFs::ReadDir))?;
    for path in &plan.read {
        // An entry that vanished since it was listed needs no rule.
        if let Ok(fd) = PathFd::new(path) {
            created = created.add_rule(PathBeneath::new(fd, read))?;
        }
    }
    for path in &plan.write {
        if let Ok(fd) = PathFd::new(path) {
            let access = if is_dir(path) {
                write
            } else {
                write & file_rights
            };
            created = created.add_rule(PathBeneath::new(fd, access))?;
        }
    }
    let status = created.restrict_self()?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => Enforcement::Full,
        RulesetStatus::PartiallyEnforced => Enforcement::Partial(
            "this kernel's Landlock lacks some restrictions (TCP needs Linux 6.7, signal \
             scoping 6.12); the rest is enforced"
                .to_string(),
        ),
        RulesetStatus::NotEnforced => {
            Enforcement::Unsupported("this kernel does not enforce Landlock".to_string())
        }
    })
}

/// Moves the calling thread into a new domain nested in its own that adds only the
/// signal and abstract-socket scopes: what it starts can no longer signal, trace or
/// connect to processes of the outer domain — the helper that supervises it.
pub(crate) fn nest() -> Result<(), LandlockError> {
    Ruleset::default()
        .scope(Scope::Signal | Scope::AbstractUnixSocket)?
        .create()?
        .restrict_self()?;
    Ok(())
}

fn is_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}
