//! The git directories outside the project that commands in it must write.
//!
//! In a linked worktree (`git worktree add`: a teammate's worktree) or a
//! submodule checkout, `.git` is a file naming the real git directory, which
//! lies outside the working tree. `git commit` there writes the index, `HEAD`
//! and its log in that directory (`git rev-parse --git-dir`), and objects, refs
//! and their logs in the repository's shared one (`--git-common-dir`), where
//! every ref deletion — `git stash pop`, `git branch -d`, even the clean-up at
//! the end of a commit — also takes `packed-refs.lock`. The sandbox therefore
//! lets commands write the whole shared git directory (a worktree's own admin
//! directory is inside it) or the submodule's git directory: the same as a
//! project's own `.git`, which is part of the writable project. Narrower grants
//! (objects, refs and logs only) were tried and leave ref deletions failing
//! and every commit printing errors.
//!
//! The files are read directly (no git process while the sandbox is set up)
//! and the link is trusted only when git's own back-reference confirms it: a
//! worktree's admin directory (`<common>/worktrees/<id>`) names this `.git`
//! file in its `gitdir`, a submodule's `core.worktree` names this directory. A
//! `.git` file written by anyone else to point at another repository grants
//! nothing.

use std::path::{Path, PathBuf};

/// Largest `.git`/`gitdir`/`commondir`/`config` file read.
const MAX_FILE: u64 = 64 * 1024;

/// The directories outside `root` a command working in `root` needs to write
/// for git to commit there; empty unless `root/.git` is a verified link.
pub fn linked_git_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(root) = std::fs::canonicalize(root) else {
        return Vec::new();
    };
    let dot_git = root.join(".git");
    match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) if meta.is_file() => {}
        _ => return Vec::new(),
    }
    let Some(git_dir) = read_small(&dot_git)
        .and_then(|text| {
            text.lines()
                .next()?
                .strip_prefix("gitdir:")
                .map(str::trim)
                .map(String::from)
        })
        .and_then(|p| std::fs::canonicalize(root.join(p)).ok())
    else {
        return Vec::new();
    };
    if git_dir.join("commondir").is_file() {
        worktree_dirs(&dot_git, &git_dir)
    } else {
        submodule_dirs(&root, &git_dir)
    }
}

/// The shared git directory of a linked worktree, when its admin directory's
/// `gitdir` names `dot_git`.
fn worktree_dirs(dot_git: &Path, git_dir: &Path) -> Vec<PathBuf> {
    let common = read_small(&git_dir.join("commondir"))
        .and_then(|c| std::fs::canonicalize(git_dir.join(c.trim_end_matches(['\n', '\r']))).ok());
    let Some(common) = common else {
        return Vec::new();
    };
    // git keeps worktree admin directories in `<common>/worktrees/<id>`.
    let in_common = git_dir.parent().is_some_and(|p| {
        p.file_name().is_some_and(|n| n == "worktrees")
            && p.parent()
                .and_then(|c| std::fs::canonicalize(c).ok())
                .is_some_and(|c| c == common)
    });
    let back = read_small(&git_dir.join("gitdir"))
        .and_then(|p| std::fs::canonicalize(git_dir.join(p.trim_end_matches(['\n', '\r']))).ok());
    if !in_common || back.as_deref() != Some(dot_git) {
        return Vec::new();
    }
    vec![common]
}

/// A submodule's git directory, when its `core.worktree` names `root`.
fn submodule_dirs(root: &Path, git_dir: &Path) -> Vec<PathBuf> {
    let Some(config) = read_small(&git_dir.join("config")) else {
        return Vec::new();
    };
    let worktree = core_worktree(&config).and_then(|w| std::fs::canonicalize(git_dir.join(w)).ok());
    if worktree.as_deref() == Some(root) {
        vec![git_dir.to_path_buf()]
    } else {
        Vec::new()
    }
}

/// `core.worktree` of a git config file, in the plain form git writes it.
fn core_worktree(config: &str) -> Option<String> {
    let mut in_core = false;
    let mut found = None;
    for line in config.lines() {
        let line = line.trim();
        if let Some(section) = line.strip_prefix('[') {
            in_core = section
                .trim_end_matches(']')
                .trim()
                .eq_ignore_ascii_case("core");
            continue;
        }
        if !in_core {
            continue;
        }
        if let Some((key, value)) = line.split_once('=')
            && key.trim().eq_ignore_ascii_case("worktree")
        {
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            found = Some(value.to_string());
        }
    }
    found
}

/// A small regular file's text; `None` if missing, large or not UTF-8.
fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn reads_core_worktree_from_the_core_section_only() {
        let config =
            "[core]\n\tbare = false\n\tworktree = ../../../sub\n[remote \"o\"]\n\tworktree = /x\n";
        assert_eq!(core_worktree(config).as_deref(), Some("../../../sub"));
        assert_eq!(core_worktree("[user]\n\tworktree = /x\n"), None);
        assert_eq!(
            core_worktree("[Core]\n WorkTree = \"/a b\"\n").as_deref(),
            Some("/a b")
        );
    }

    #[test]
    fn a_plain_directory_or_a_forged_git_file_grants_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        assert!(linked_git_dirs(&root).is_empty());

        // A `.git` file pointing at a directory shaped like a worktree admin
        // dir whose back-reference names another checkout.
        let forged = dir.path().join("forged");
        let other = dir.path().join("repo/.git");
        std::fs::create_dir_all(other.join("worktrees/x")).unwrap();
        std::fs::create_dir_all(other.join("objects")).unwrap();
        std::fs::write(other.join("worktrees/x/commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        std::fs::write(dir.path().join("elsewhere/.git"), "gitdir: x\n").unwrap();
        std::fs::write(
            other.join("worktrees/x/gitdir"),
            format!("{}\n", dir.path().join("elsewhere/.git").display()),
        )
        .unwrap();
        std::fs::create_dir_all(&forged).unwrap();
        std::fs::write(
            forged.join(".git"),
            format!("gitdir: {}\n", other.join("worktrees/x").display()),
        )
        .unwrap();
        assert!(linked_git_dirs(&forged).is_empty());

        // The genuine checkout gets the shared git directory.
        std::fs::write(
            dir.path().join("elsewhere/.git"),
            format!("gitdir: {}\n", other.join("worktrees/x").display()),
        )
        .unwrap();
        let other = std::fs::canonicalize(&other).unwrap();
        assert_eq!(linked_git_dirs(&dir.path().join("elsewhere")), vec![other]);
    }
}
