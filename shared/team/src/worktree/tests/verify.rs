//! The repository side of a verified merge: a conflict ends it with nothing made, the
//! user's uncommitted change to a file the merge changes refuses it, a HEAD that moved
//! while it was verified refuses the landing, and a landing is a fast-forward to exactly
//! the verified commit that keeps unrelated uncommitted work. The scratch tree holds the
//! merge and none of the user's changes, and is removed when dropped.

use super::*;

fn prepared(v: Verification) -> PreparedMerge {
    match v {
        Verification::Ready(p) => p,
        Verification::Done(outcome) => panic!("nothing to verify: {outcome:?}"),
    }
}

#[test]
fn a_verified_merge_is_made_apart_and_lands_as_a_fast_forward_of_the_verified_commit() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    w.commit_in(&alice.path, "c.txt", "sea\n", "alice: c");
    std::fs::write(repo.join("b.txt"), "the user's edit\n").unwrap();
    let lead = w.lead(&repo);
    let before = w.head(&repo);
    let index = std::fs::read(repo.join(".git/index")).unwrap();
    let p = prepared(
        lead.prepare_verified(&name("team"), &name("alice"), false, &repo)
            .unwrap(),
    );
    // Nothing of the user's moved; the scratch tree has the merge, not the user's edit.
    assert_eq!(w.head(&repo), before);
    assert_eq!(std::fs::read(repo.join(".git/index")).unwrap(), index);
    assert!(!repo.join("c.txt").exists());
    let scratch = p.scratch.path().to_path_buf();
    assert_eq!(p.workdir, scratch);
    assert_eq!(
        std::fs::read_to_string(scratch.join("c.txt")).unwrap(),
        "sea\n"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.join("b.txt")).unwrap(),
        "bee\n"
    );
    let outcome = lead.finish_verified(&p).unwrap();
    let MergeOutcome::Merged { commit, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(commit, p.merge_commit);
    assert_eq!(w.head(&repo), p.merge_commit);
    assert_eq!(
        w.sh(&repo, &["rev-parse", "HEAD^1"]).trim(),
        before,
        "the user's HEAD is the first parent"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("b.txt")).unwrap(),
        "the user's edit\n"
    );
    assert!(repo.join("c.txt").is_file());
    drop(p);
    assert!(!scratch.exists(), "the scratch tree is removed");
}

#[test]
fn a_conflict_a_dirty_overlap_and_a_moved_branch_merge_nothing() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    let bob = w.add(&repo, "bob");
    let carol = w.add(&repo, "carol");
    w.commit_in(&alice.path, "b.txt", "alice's bee\n", "alice: b");
    w.commit_in(&bob.path, "a.txt", "bob's a\n", "bob: a");
    w.commit_in(&carol.path, "c.txt", "sea\n", "carol: c");
    w.commit_in(&repo, "b.txt", "the user's bee\n", "user: b");
    let lead = w.lead(&repo);
    let before = w.head(&repo);
    // alice's branch conflicts with the user's commit.
    match lead
        .prepare_verified(&name("team"), &name("alice"), false, &repo)
        .unwrap()
    {
        Verification::Done(MergeOutcome::Conflict { files, .. }) => {
            assert_eq!(files, vec![PathBuf::from("b.txt")]);
        }
        other => panic!("{other:?}"),
    }
    // The user edits a.txt, which bob's merge changes.
    std::fs::write(repo.join("a.txt"), "the user's a\n").unwrap();
    let error = lead
        .prepare_verified(&name("team"), &name("bob"), false, &repo)
        .unwrap_err();
    assert!(
        matches!(error, WorktreeError::DirtyOverlap { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("a.txt"), "{error}");
    // carol's merge is verified, but the user commits meanwhile.
    let p = prepared(
        lead.prepare_verified(&name("team"), &name("carol"), false, &repo)
            .unwrap(),
    );
    w.commit_in(&repo, "a.txt", "the user's a\n", "user: a");
    let moved = w.head(&repo);
    let error = lead.finish_verified(&p).unwrap_err();
    assert!(
        matches!(error, WorktreeError::BranchMoved { .. }),
        "{error}"
    );
    assert_eq!(w.head(&repo), moved);
    assert_ne!(moved, before);
    assert!(!repo.join("c.txt").exists());
}

/// While the command runs, the user's tree goes on: a git-ignored file that appears at a
/// path the merge adds (checked only before the verification) is not overwritten by
/// the landing's fast-forward, which git would otherwise do without a word.
#[test]
fn an_ignored_file_made_while_verifying_is_not_overwritten_by_the_landing() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    w.commit_in(&alice.path, "c.txt", "sea\n", "alice: c");
    let lead = w.lead(&repo);
    let before = w.head(&repo);
    let p = prepared(
        lead.prepare_verified(&name("team"), &name("alice"), false, &repo)
            .unwrap(),
    );
    std::fs::write(repo.join(".git/info/exclude"), "c.txt\n").unwrap();
    std::fs::write(repo.join("c.txt"), "the user's secret\n").unwrap();
    let landed = lead.finish_verified(&p);
    assert_eq!(
        std::fs::read_to_string(repo.join("c.txt")).unwrap(),
        "the user's secret\n"
    );
    assert!(landed.is_err(), "{landed:?}");
    assert_eq!(w.head(&repo), before);
}
