//! The ready clone: used when it matches the lead, giving the same worktree as a clone made
//! at the spawn; not used when stale, replaced or tampered with (the clone is then made as
//! before and nothing outside the worktrees directory is touched); removed with the team
//! and at the lead's exit, and never taken for a teammate's.

use std::sync::Arc;

use super::*;

fn with_ready(w: &World, repo: &Path, ready: &Arc<ReadyClones>) -> LeadRepo {
    w.lead(repo).with_ready(ready.clone())
}

/// Whether the clone at `path` was the ready clone (its HEAD's log shows the rename).
fn from_ready(path: &Path) -> bool {
    std::fs::read_to_string(path.join(".git/logs/HEAD"))
        .unwrap()
        .contains(READY_BRANCH)
}

/// What a teammate's clone shows, with the member's name replaced by `M`.
fn shape(w: &World, clone: &Path, member: &str) -> Vec<String> {
    let norm = |s: String| s.replace(member, "M");
    let mut out = vec![
        norm(w.sh(clone, &["symbolic-ref", "HEAD"])),
        w.sh(clone, &["rev-parse", "HEAD"]),
        norm(w.sh(
            clone,
            &["for-each-ref", "--format=%(refname) %(objectname)"],
        )),
        w.sh(clone, &["config", "user.name"]),
        w.sh(clone, &["config", "user.email"]),
        w.sh(
            clone,
            &["config", "--get-regexp", "^(remote|branch|core)\\."],
        ),
        w.sh(
            clone,
            &[
                "status",
                "--porcelain",
                "--untracked-files=all",
                "--ignored",
            ],
        ),
        std::fs::read_to_string(clone.join(".git/objects/info/alternates")).unwrap(),
    ];
    let mut files = Vec::new();
    let mut pending = vec![clone.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.is_symlink() {
                pending.push(path.clone());
            }
            files.push(norm(
                path.strip_prefix(clone).unwrap().display().to_string(),
            ));
        }
    }
    files.sort();
    out.push(files.join("\n"));
    out
}

#[test]
fn a_ready_clone_gives_the_same_worktree_as_a_clone_made_at_the_spawn() {
    let w = World::new();
    let repo = w.repo();
    let ready = Arc::new(ReadyClones::default());
    let lead = with_ready(&w, &repo, &ready);
    let team = name("team");
    assert!(lead.prepare_ready(&team).unwrap());
    let ready_path = lead.ready_path(&team);
    // Never a teammate's: cleanup and the member listing do not see it.
    assert_eq!(
        w.sh(&repo, &["branch", "--list", "roo/*", "roo-ready*"]),
        ""
    );

    let alice = lead.add_worktree(&team, &name("alice")).unwrap();
    assert!(from_ready(&alice.path), "the ready clone was not used");
    assert!(!ready_path.exists());
    assert!(!alice.reused && alice.created_branch);
    assert_eq!(alice.base, w.head(&repo));
    assert_eq!(alice.branch, "roo/team/alice");
    assert_eq!(
        w.head(&repo),
        w.sh(&repo, &["rev-parse", "roo/team/alice"]).trim()
    );

    // The same as a clone made at the spawn, with no ready clone, from the same lead
    // state (without alice's branch, which a later clone copies as `origin/roo/team/alice`).
    w.sh(&repo, &["branch", "-D", "roo/team/alice"]);
    let bob = w.add(&repo, "bob");
    assert!(!from_ready(&bob.path));
    assert_eq!(shape(&w, &alice.path, "alice"), shape(&w, &bob.path, "bob"));
    assert_eq!(alice.notices, bob.notices);
    // TeamMerge's fetch takes alice's commits as any teammate's.
    w.commit_in(&alice.path, "c.txt", "sea\n", "alice's work");
    assert!(lead.fetch_member(&team, &name("alice")).unwrap());
    assert_eq!(
        w.sh(&repo, &["rev-parse", "roo/team/alice"]),
        w.sh(&alice.path, &["rev-parse", "HEAD"])
    );
}

#[test]
fn a_stale_ready_clone_is_not_used() {
    let w = World::new();
    let repo = w.repo();
    let ready = Arc::new(ReadyClones::default());
    let lead = with_ready(&w, &repo, &ready);
    let team = name("team");
    assert!(lead.prepare_ready(&team).unwrap());
    w.commit_in(&repo, "a.txt", "changed\n", "after the ready clone");

    let alice = lead.add_worktree(&team, &name("alice")).unwrap();
    assert!(!from_ready(&alice.path));
    assert_eq!(w.head(&alice.path), w.head(&repo));
    assert_eq!(
        std::fs::read_to_string(alice.path.join("a.txt")).unwrap(),
        "changed\n"
    );
    assert!(!lead.ready_path(&team).exists());

    // A member whose branch exists continues from it, as before: not from a ready clone.
    assert!(lead.prepare_ready(&team).unwrap());
    w.sh(&repo, &["branch", "roo/team/bob", "HEAD~1"]);
    let bob = lead.add_worktree(&team, &name("bob")).unwrap();
    assert_eq!(
        w.head(&bob.path),
        w.sh(&repo, &["rev-parse", "HEAD~1"]).trim()
    );
    assert!(!lead.ready_path(&team).exists());
}

#[test]
fn a_ready_clone_is_removed_with_the_team_and_at_the_leads_exit() {
    let w = World::new();
    let repo = w.repo();
    let ready = Arc::new(ReadyClones::default());
    let lead = with_ready(&w, &repo, &ready);
    let team = name("team");
    assert!(lead.prepare_ready(&team).unwrap());
    // TeamDelete's cleanup: gone, and reported as no member's.
    let report = w.lead(&repo).cleanup(&team).unwrap();
    assert_eq!(report, CleanupReport::default());
    assert!(!lead.ready_path(&team).exists());

    assert!(lead.prepare_ready(&team).unwrap());
    assert!(lead.ready_path(&team).is_dir());
    ready.remove_all();
    assert!(!lead.ready_path(&team).exists());
    // A preparation that ends after the lead's exit leaves nothing either.
    assert!(!lead.prepare_ready(&team).unwrap());
    assert!(!lead.ready_path(&team).exists());
    // Nothing else of the team's was there to remove.
    assert_eq!(
        std::fs::read_dir(repo.join(WORKTREES_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with(".gitignore") && n != ".lock")
            .count(),
        0
    );
}

#[test]
fn a_replaced_or_tampered_ready_clone_is_refused_and_nothing_outside_is_touched() {
    let w = World::new();
    let repo = w.repo();
    let ready = Arc::new(ReadyClones::default());
    let lead = with_ready(&w, &repo, &ready);
    let team = name("team");

    // Replaced by a link to a clone elsewhere: the link goes, its target stays.
    assert!(lead.prepare_ready(&team).unwrap());
    let ready_path = lead.ready_path(&team);
    let outside = w.base.join("outside");
    std::fs::rename(&ready_path, &outside).unwrap();
    std::fs::write(outside.join("canary"), "keep\n").unwrap();
    std::os::unix::fs::symlink(&outside, &ready_path).unwrap();
    let alice = lead.add_worktree(&team, &name("alice")).unwrap();
    assert!(!alice.path.is_symlink() && alice.path.join(".git").is_dir());
    assert!(!alice.path.join("canary").exists());
    assert_eq!(
        std::fs::read_to_string(outside.join("canary")).unwrap(),
        "keep\n"
    );
    assert!(std::fs::symlink_metadata(&ready_path).is_err());

    // Its git config changed after it was made (a hook path): not used.
    assert!(lead.prepare_ready(&team).unwrap());
    w.sh(
        &ready_path,
        &["config", "core.hooksPath", "/nonexistent/hooks"],
    );
    let bob = lead.add_worktree(&team, &name("bob")).unwrap();
    assert!(!from_ready(&bob.path));
    assert!(
        w.sh(&bob.path, &["config", "--list"])
            .find("hookspath")
            .is_none()
    );

    // A tracked file rewritten in place: not used either.
    assert!(lead.prepare_ready(&team).unwrap());
    std::fs::write(ready_path.join("a.txt"), "one\ntwo\nthree\nplanted\n").unwrap();
    let carol = lead.add_worktree(&team, &name("carol")).unwrap();
    assert!(!from_ready(&carol.path));
    assert_eq!(w.sh(&carol.path, &["status", "--porcelain"]), "");

    // A ready clone nothing here recorded (left by another process) is never used.
    let other = Arc::new(ReadyClones::default());
    assert!(with_ready(&w, &repo, &other).prepare_ready(&team).unwrap());
    let dan = w.lead(&repo).with_ready(ready.clone());
    let dan = dan.add_worktree(&team, &name("dan")).unwrap();
    assert!(!from_ready(&dan.path));
}
