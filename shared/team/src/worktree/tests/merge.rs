//! A teammate's branch back into the lead's tree: the merge (no fast-forward, aborted on
//! a conflict, refused over uncommitted or untracked work), the fetch from a clone, and
//! the project config a branch may change only when allowed.

use std::path::PathBuf;

use super::*;

#[test]
fn two_teammates_commit_then_cleanup_keeps_both_and_the_lead_merges_both_with_no_ff() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    let bob = w.add(&repo, "bob");
    assert_eq!(alice.path, repo.join(".roocode/worktrees/team+alice"));
    assert_eq!(alice.branch, "roo/team/alice");
    assert_eq!(alice.base, w.head(&repo));
    assert!(!alice.reused && alice.notices.is_empty(), "{alice:?}");
    assert_eq!(
        w.sh(&alice.path, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/roo/team/alice"
    );
    // The worktrees stay out of the lead's status.
    assert_eq!(
        w.sh(&repo, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );

    w.commit_in(
        &alice.path,
        "a.txt",
        "one\ntwo (alice)\nthree\n",
        "alice: two",
    );
    std::fs::write(alice.path.join("notes.md"), "draft\n").unwrap();
    w.commit_in(&bob.path, "c.txt", "sea\n", "bob: add c");

    let lead = w.lead(&repo);
    let report = lead.cleanup(&name("team")).unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.kept.len(), 2, "{report:?}");
    let kept_alice = report.kept.iter().find(|k| k.member == "alice").unwrap();
    assert_eq!(kept_alice.path, alice.path);
    assert_eq!(kept_alice.branch, "roo/team/alice");
    let KeptWhy::Changes(changes) = &kept_alice.why else {
        panic!("{kept_alice:?}")
    };
    assert_eq!(changes.unmerged_count, 1);
    assert_eq!(changes.unmerged[0].subject, "alice: two");
    assert_eq!(changes.uncommitted, vec!["?? notes.md".to_string()]);
    let lines = report.lines().join("\n");
    assert!(
        lines.contains(&format!(
            "kept {} (branch roo/team/bob): 1 unmerged commit(s)",
            bob.path.display()
        )) && lines.contains("merge with TeamMerge"),
        "{lines}"
    );
    assert!(alice.path.is_dir() && bob.path.is_dir());

    let before = w.head(&repo);
    let merged = lead.merge(&name("team"), &name("alice")).unwrap();
    let MergeOutcome::Merged {
        left_uncommitted, ..
    } = &merged
    else {
        panic!("{merged:?}")
    };
    assert_eq!(left_uncommitted, &vec!["?? notes.md".to_string()]);
    assert!(
        merged.summary().contains("notes.md"),
        "{}",
        merged.summary()
    );
    assert!(matches!(
        lead.merge(&name("team"), &name("bob")).unwrap(),
        MergeOutcome::Merged { .. }
    ));
    // Two merge commits, each with two parents (--no-ff), on main.
    let merges = w.sh(&repo, &["rev-list", "--merges", &format!("{before}..main")]);
    assert_eq!(merges.lines().count(), 2);
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "one\ntwo (alice)\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("c.txt")).unwrap(),
        "sea\n"
    );
    assert!(matches!(
        lead.merge(&name("team"), &name("bob")).unwrap(),
        MergeOutcome::UpToDate { .. }
    ));

    // Now bob's worktree is clean and merged: removed with its branch;
    // alice still has an uncommitted file: kept.
    let report = lead.cleanup(&name("team")).unwrap();
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert_eq!(report.removed[0].member, "bob");
    assert!(report.removed[0].branch_deleted);
    assert!(!bob.path.exists());
    assert_eq!(w.sh(&repo, &["branch", "--list", "roo/team/bob"]), "");
    assert_eq!(report.kept.len(), 1);
    let KeptWhy::Changes(changes) = &report.kept[0].why else {
        panic!("{report:?}")
    };
    assert_eq!((changes.unmerged_count, changes.uncommitted_count), (0, 1));
    assert_eq!(
        std::fs::read_to_string(alice.path.join("notes.md")).unwrap(),
        "draft\n"
    );
}

#[test]
fn a_conflicting_merge_is_aborted_and_the_lead_tree_is_untouched() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    w.commit_in(
        &alice.path,
        "a.txt",
        "one\nALICE\nthree\n",
        "alice edits two",
    );
    w.commit_in(&alice.path, "d.txt", "new\n", "alice adds d");
    w.commit_in(&repo, "a.txt", "one\nLEAD\nthree\n", "lead edits two");
    let before = w.head(&repo);

    let lead = w.lead(&repo);
    let outcome = lead.merge(&name("team"), &name("alice")).unwrap();
    assert_eq!(
        outcome,
        MergeOutcome::Conflict {
            branch: "roo/team/alice".to_string(),
            files: vec![PathBuf::from("a.txt")],
        }
    );
    assert!(
        outcome.summary().contains("aborted"),
        "{}",
        outcome.summary()
    );
    assert_eq!(w.head(&repo), before);
    assert_eq!(
        w.sh(&repo, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    assert!(!repo.join(".git/MERGE_HEAD").exists());
    assert!(!repo.join("d.txt").exists());
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "one\nLEAD\nthree\n"
    );
}

#[test]
fn a_merge_refuses_a_lead_tree_with_uncommitted_changes() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    w.commit_in(&alice.path, "c.txt", "sea\n", "alice adds c");
    std::fs::write(repo.join("b.txt"), "changed by the lead\n").unwrap();
    let err = w
        .lead(&repo)
        .merge(&name("team"), &name("alice"))
        .unwrap_err();
    assert!(matches!(err, WorktreeError::LeadTreeDirty { .. }), "{err}");
    assert!(err.to_string().contains("b.txt"), "{err}");
    assert_eq!(
        std::fs::read_to_string(repo.join("b.txt")).unwrap(),
        "changed by the lead\n"
    );
    let err = w
        .lead(&repo)
        .merge(&name("team"), &name("nobody"))
        .unwrap_err();
    assert!(matches!(err, WorktreeError::NoBranch { .. }), "{err}");
}

#[test]
fn a_merge_stopped_by_an_untracked_file_leaves_the_lead_tree_as_it_was_and_hooks_never_run() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    w.commit_in(&alice.path, "c.txt", "sea\n", "alice adds c");
    let lead = w.lead(&repo);
    let before = w.head(&repo);

    // An untracked file the merge would overwrite: refused before git starts.
    std::fs::write(repo.join("c.txt"), "the lead's own\n").unwrap();
    let err = lead.merge(&name("team"), &name("alice")).unwrap_err();
    assert!(
        matches!(err, WorktreeError::MergeWouldOverwrite { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("c.txt (untracked file)"), "{err}");
    assert_eq!(
        std::fs::read_to_string(repo.join("c.txt")).unwrap(),
        "the lead's own\n"
    );
    std::fs::remove_file(repo.join("c.txt")).unwrap();

    // Hooks never run for the runtime's git: a `pre-merge-commit` that refuses and a
    // `post-merge` that writes the lead's tree (planted by anyone) are ignored.
    for (hook, body) in [
        (
            "pre-merge-commit",
            "#!/bin/sh\necho 'policy says no' >&2\nexit 1\n",
        ),
        ("post-merge", "#!/bin/sh\necho pwned > pwned.txt\n"),
        (
            "reference-transaction",
            "#!/bin/sh\necho pwned > ref-pwned.txt\n",
        ),
    ] {
        let hook = repo.join(".git/hooks").join(hook);
        std::fs::write(&hook, body).unwrap();
        let mut perms = std::fs::metadata(&hook).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&hook, perms).unwrap();
    }
    let merged = lead.merge(&name("team"), &name("alice")).unwrap();
    assert!(matches!(merged, MergeOutcome::Merged { .. }), "{merged:?}");
    assert!(!repo.join("pwned.txt").exists() && !repo.join("ref-pwned.txt").exists());
    assert_ne!(w.head(&repo), before);
    assert_eq!(
        w.sh(&repo, &["rev-list", "--parents", "-n1", "HEAD"])
            .split_whitespace()
            .count(),
        3
    );
}

#[test]
fn the_leads_branch_follows_a_teammates_commits_and_an_unchanged_clone_is_not_fetched() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    let lead = w.lead(&repo);
    let mut state = SyncState::default();
    // A clone made just now names the lead's commit: read from the two ref files, no fetch
    // (it would run while the new teammate starts).
    assert!(lead.sync_team(&name("team"), &mut state).is_empty());
    assert!(lead.sync_team(&name("team"), &mut state).is_empty());
    w.commit_in(&alice.path, "c.txt", "sea\n", "alice adds c");
    assert_eq!(
        lead.sync_team(&name("team"), &mut state),
        vec![name("alice")]
    );
    assert_eq!(
        w.sh(&repo, &["log", "-1", "--format=%s", "roo/team/alice"]),
        "alice adds c\n"
    );
    // Another team's clones are not this team's.
    assert!(lead.sync_team(&name("other"), &mut state).is_empty());
}

#[test]
fn a_clone_that_would_lead_the_fetch_elsewhere_or_block_it_is_refused_and_nothing_is_fetched() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    w.commit_in(&alice.path, "c.txt", "sea\n", "alice: add c");
    let lead = w.lead(&repo);
    let refs = alice.path.join(".git/refs/heads/roo/team/alice");
    let tip = std::fs::read_to_string(&refs).unwrap();
    // A secret repository the teammate's sandbox cannot read.
    let secret = w.base.join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    w.sh(&secret, &["init", "-q", "-b", "main"]);
    w.sh(&secret, &["config", "user.name", "Secret"]);
    w.sh(&secret, &["config", "user.email", "secret@example.invalid"]);
    w.commit_in(&secret, "s.txt", "CUSTOMER-SECRET\n", "secret");
    let secret_objects = secret.join(".git/objects");
    let alternates = alice.path.join(".git/objects/info/alternates");
    let original = std::fs::read_to_string(&alternates).unwrap();
    let refused = |why: &str| {
        let err = lead
            .fetch_member(&name("team"), &name("alice"))
            .unwrap_err();
        assert!(
            matches!(&err, WorktreeError::UnsafeClone { why: said, .. } if said.contains(why)),
            "{err}"
        );
    };
    // Alternates naming another object store.
    std::fs::write(
        &alternates,
        format!("{original}{}\n", secret_objects.display()),
    )
    .unwrap();
    refused("names other object stores");
    std::fs::write(&alternates, &original).unwrap();
    // The branch file a symlink to another repository's ref.
    std::fs::remove_file(&refs).unwrap();
    std::os::unix::fs::symlink(secret.join(".git/refs/heads/main"), &refs).unwrap();
    refused("symlink or special file");
    // A FIFO, which would block the fetch.
    std::fs::remove_file(&refs).unwrap();
    nix::unistd::mkfifo(&refs, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    refused("symlink or special file");
    std::fs::remove_file(&refs).unwrap();
    // A symlinked config.
    let config = alice.path.join(".git/config");
    let saved = std::fs::read(&config).unwrap();
    std::fs::remove_file(&config).unwrap();
    std::os::unix::fs::symlink(secret.join(".git/config"), &config).unwrap();
    refused("not a regular file");
    std::fs::remove_file(&config).unwrap();
    std::fs::write(&config, saved).unwrap();
    // Nothing of the secret reached the lead's objects.
    let secret_head = w.head(&secret);
    let lead_has = Command::new("git")
        .args(["cat-file", "-e", &secret_head])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(!lead_has.success());
    // Put right, the fetch works.
    std::fs::write(&refs, tip).unwrap();
    assert!(lead.fetch_member(&name("team"), &name("alice")).unwrap());
}

#[test]
fn a_branch_that_changes_roocode_or_git_config_is_merged_only_when_allowed() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    std::fs::create_dir_all(alice.path.join(".roocode")).unwrap();
    w.commit_in(
        &alice.path,
        ".roocode/config.yaml",
        "permission_mode: bypassPermissions\n",
        "alice: config",
    );
    w.commit_in(
        &alice.path,
        ".gitattributes",
        "* filter=x\n",
        "alice: attributes",
    );
    w.commit_in(&alice.path, "c.txt", "sea\n", "alice: add c");
    let lead = w.lead(&repo);
    let before = w.head(&repo);
    let err = lead
        .merge_checked(&name("team"), &name("alice"), false)
        .unwrap_err();
    match &err {
        WorktreeError::ProtectedChanges { files, .. } => {
            assert_eq!(files, &[".gitattributes", ".roocode/config.yaml"], "{err}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(w.head(&repo), before, "nothing was merged");
    assert!(!repo.join(".roocode/config.yaml").exists());
    let merged = lead
        .merge_checked(&name("team"), &name("alice"), true)
        .unwrap();
    assert!(matches!(merged, MergeOutcome::Merged { .. }), "{merged:?}");
    assert!(repo.join(".roocode/config.yaml").exists());
}
