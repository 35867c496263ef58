//! A teammate's worktree from start to end: made (or a shared directory where git cannot
//! make one), reused, refused for names and paths that could escape, what the sandbox
//! grants it and the lead's tools see of it, and its cleanup.

use std::path::{Path, PathBuf};

use roo_agent::config::{ConfigFiles, ProjectTrust};
use roo_agent::permissions::{PermissionDecision, PermissionMode};
use roo_agent::tool::{Tool, ToolContext};
use roo_agent::tools::WriteFile;
use serde_json::json;

use super::*;

#[test]
fn a_clean_worktree_is_removed_with_its_branch() {
    let w = World::new();
    let repo = w.repo();
    let carol = w.add(&repo, "carol");
    std::fs::write(carol.path.join(".gitignore"), "target/\n.env\n").unwrap();
    w.sh(&carol.path, &["add", ".gitignore"]);
    w.sh(&carol.path, &["commit", "-q", "-m", "ignore target"]);
    assert!(
        w.lead(&repo)
            .fetch_member(&name("team"), &name("carol"))
            .unwrap()
    );
    w.sh(&repo, &["merge", "-q", "--ff-only", "roo/team/carol"]);
    // Ignored files are never deleted silently: the clone is kept and they are named.
    std::fs::create_dir_all(carol.path.join("target")).unwrap();
    std::fs::write(carol.path.join("target/out"), "x").unwrap();
    std::fs::write(carol.path.join(".env"), "SECRET=1\n").unwrap();
    let report = w.lead(&repo).cleanup(&name("team")).unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    let [kept] = report.kept.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(
        kept.why,
        KeptWhy::Ignored(vec!["!! .env".to_string(), "!! target/".to_string()])
    );
    assert!(report.lines()[0].contains(".env, target/"), "{report:?}");
    assert_eq!(
        std::fs::read_to_string(carol.path.join(".env")).unwrap(),
        "SECRET=1\n"
    );
    std::fs::remove_dir_all(carol.path.join("target")).unwrap();
    std::fs::remove_file(carol.path.join(".env")).unwrap();

    let report = w.lead(&repo).cleanup(&name("team")).unwrap();
    assert_eq!(report.kept, vec![], "{report:?}");
    assert_eq!(report.removed.len(), 1);
    assert!(report.removed[0].branch_deleted);
    assert!(!carol.path.exists());
    assert_eq!(w.sh(&repo, &["branch", "--list", "roo/*"]), "");
    // One member at a time: the other is left alone.
    let dan = w.add(&repo, "dan");
    let eve = w.add(&repo, "eve");
    let report = w
        .lead(&repo)
        .cleanup_member(&name("team"), &name("dan"))
        .unwrap();
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert!(!dan.path.exists() && eve.path.is_dir());
    w.lead(&repo).cleanup(&name("team")).unwrap();
    assert!(!eve.path.exists());
    // Another team's worktree is not touched.
    let other = match prepare(&repo, &name("other"), &name("carol"), &w.git).unwrap() {
        Workspace::Worktree(w) => w,
        ws => panic!("{ws:?}"),
    };
    let report = w.lead(&repo).cleanup(&name("team")).unwrap();
    assert_eq!(report, CleanupReport::default());
    assert!(other.path.is_dir());
}

#[test]
fn names_that_could_escape_or_break_the_branch_are_refused_before_any_path_is_built() {
    let w = World::new();
    let repo = w.repo();
    for bad in ["..", "../x", "a/b", "/abs", "", ".hidden", "a\0b"] {
        assert!(Name::parse_as("member name", bad).is_err(), "{bad:?}");
    }
    let lead = w.lead(&repo);
    for bad in ["a..b", "x.lock", "trailing."] {
        let err = lead.add_worktree(&name("team"), &name(bad)).unwrap_err();
        assert!(
            matches!(err, WorktreeError::BranchName { .. }),
            "{bad}: {err}"
        );
        let err = lead.add_worktree(&name(bad), &name("alice")).unwrap_err();
        assert!(err.to_string().contains("team name"), "{err}");
    }
    assert!(!repo.join(".roocode").exists());
    assert_eq!(w.sh(&repo, &["branch", "--list", "roo/*"]), "");
}

#[test]
fn a_symlinked_worktrees_dir_is_refused() {
    let w = World::new();
    let repo = w.repo();
    let outside = w.base.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(repo.join(".roocode")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join(".roocode/worktrees")).unwrap();
    let err = prepare(&repo, &name("team"), &name("alice"), &w.git).unwrap_err();
    assert!(matches!(err, WorktreeError::Symlink { .. }), "{err}");
    assert!(err.to_string().contains(".roocode/worktrees"), "{err}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

    // `.roocode` itself as a link, and the member's entry as a link.
    let err = w.lead(&repo).cleanup(&name("team")).unwrap_err();
    assert!(matches!(err, WorktreeError::Symlink { .. }), "{err}");
    std::fs::remove_file(repo.join(".roocode/worktrees")).unwrap();
    std::fs::remove_dir(repo.join(".roocode")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join(".roocode")).unwrap();
    let err = prepare(&repo, &name("team"), &name("alice"), &w.git).unwrap_err();
    assert!(matches!(err, WorktreeError::Symlink { .. }), "{err}");
    std::fs::remove_file(repo.join(".roocode")).unwrap();
    std::fs::create_dir_all(repo.join(".roocode/worktrees")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join(".roocode/worktrees/team+alice")).unwrap();
    let err = prepare(&repo, &name("team"), &name("alice"), &w.git).unwrap_err();
    assert!(matches!(err, WorktreeError::Symlink { .. }), "{err}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert_eq!(w.sh(&repo, &["branch", "--list", "roo/*"]), "");
}

#[test]
fn outside_a_repository_or_before_the_first_commit_teammates_share_the_directory() {
    let w = World::new();
    let plain = w.base.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let ws = prepare(&plain, &name("team"), &name("alice"), &w.git).unwrap();
    assert_eq!(
        ws,
        Workspace::Shared {
            dir: plain.clone(),
            why: SharedWhy::NotARepository
        }
    );
    assert_eq!(ws.dir(), plain);
    let notice = ws.notices().join("\n");
    assert!(
        notice.contains("share the working directory") && notice.contains("not in a git"),
        "{notice}"
    );
    assert!(!plain.join(".roocode").exists());

    let empty = w.base.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    w.sh(&empty, &["init", "-q"]);
    let ws = prepare(&empty, &name("team"), &name("alice"), &w.git).unwrap();
    assert!(
        matches!(
            &ws,
            Workspace::Shared {
                why: SharedWhy::NoCommits,
                ..
            }
        ),
        "{ws:?}"
    );
    assert!(ws.notices()[0].contains("no commit"), "{:?}", ws.notices());

    let bare = w.base.join("bare.git");
    w.sh(&w.base, &["init", "-q", "--bare", "bare.git"]);
    let ws = prepare(&bare, &name("team"), &name("alice"), &w.git).unwrap();
    assert!(
        matches!(
            &ws,
            Workspace::Shared {
                why: SharedWhy::NoWorkTree,
                ..
            }
        ),
        "{ws:?}"
    );

    let err = prepare(
        &w.base.join("nowhere"),
        &name("team"),
        &name("alice"),
        &w.git,
    )
    .unwrap_err();
    assert!(matches!(err, WorktreeError::Io { .. }), "{err}");
    assert!(err.to_string().contains("nowhere"), "{err}");

    let missing = prepare(
        &plain,
        &name("team"),
        &name("alice"),
        &w.git.clone().with_program(w.base.join("no-such-git")),
    )
    .unwrap();
    assert!(
        matches!(
            &missing,
            Workspace::Shared {
                why: SharedWhy::NoGit(_),
                ..
            }
        ),
        "{missing:?}"
    );
}

#[test]
fn an_existing_worktree_is_reused_when_it_is_ours_and_refused_otherwise() {
    let w = World::new();
    let repo = w.repo();
    let first = w.add(&repo, "alice");
    w.commit_in(&first.path, "c.txt", "sea\n", "alice adds c");
    // From a subdirectory of the lead's tree, too.
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    let again = w.add(&repo.join("sub"), "alice");
    assert!(again.reused);
    assert_eq!(again.path, first.path);
    assert_eq!(again.base, w.head(&first.path));

    // A plain directory in the way.
    std::fs::create_dir_all(repo.join(".roocode/worktrees/team+bob")).unwrap();
    let err = prepare(&repo, &name("team"), &name("bob"), &w.git).unwrap_err();
    assert!(matches!(err, WorktreeError::Occupied { .. }), "{err}");
    assert!(err.to_string().contains("not a teammate's clone"), "{err}");

    // A clone that was switched to another branch.
    let dave = w.add(&repo, "dave");
    w.sh(&dave.path, &["checkout", "-q", "-b", "elsewhere"]);
    let err = prepare(&repo, &name("team"), &name("dave"), &w.git).unwrap_err();
    assert!(err.to_string().contains("branch elsewhere"), "{err}");

    // A git worktree (of an older RooCode) at the path.
    let path = repo.join(".roocode/worktrees/team+erin");
    w.sh(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "roo/team/erin",
            path.to_str().unwrap(),
        ],
    );
    let err = prepare(&repo, &name("team"), &name("erin"), &w.git).unwrap_err();
    assert!(err.to_string().contains("git worktree remove"), "{err}");

    // A branch left by an earlier run (clone gone) is continued on the branch
    // itself, never on a detached HEAD (issue 18).
    let frank = w.add(&repo, "frank");
    w.commit_in(&frank.path, "f.txt", "eff\n", "frank adds f");
    let tip = w.head(&frank.path);
    assert!(
        w.lead(&repo)
            .fetch_member(&name("team"), &name("frank"))
            .unwrap()
    );
    std::fs::remove_dir_all(&frank.path).unwrap();
    let again = w.add(&repo, "frank");
    assert_eq!((again.base.as_str(), again.reused), (tip.as_str(), false));
    assert!(
        again.notices[0].contains("1 commit(s)"),
        "{:?}",
        again.notices
    );
    assert!(again.path.join("f.txt").is_file());
    assert_eq!(
        w.sh(&again.path, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/roo/team/frank"
    );
    w.commit_in(&again.path, "g.txt", "gee\n", "frank adds g");
    let merged = w.lead(&repo).merge(&name("team"), &name("frank")).unwrap();
    assert!(matches!(merged, MergeOutcome::Merged { .. }), "{merged:?}");
    assert!(repo.join("g.txt").is_file() && repo.join("f.txt").is_file());
}

#[test]
fn a_failing_status_beside_the_clone_fails_the_spawn_and_leaves_no_clone_or_branch() {
    let w = World::new();
    let repo = w.repo();
    // An index git cannot read: the lead's status fails, the clone and checkout do not.
    std::fs::write(repo.join(".git/index"), "not an index\n").unwrap();
    let err = prepare(&repo, &name("team"), &name("alice"), &w.git).unwrap_err();
    assert!(err.to_string().contains("status"), "{err}");
    let path = repo.join(".roocode/worktrees/team+alice");
    assert!(
        !path.exists(),
        "a half-made clone stayed: {}",
        path.display()
    );
    assert!(
        w.sh(&repo, &["branch", "--list", "roo/team/alice"])
            .trim()
            .is_empty(),
        "the lead's branch was made"
    );
}

#[test]
fn a_dirty_lead_tree_and_a_detached_head_are_reported() {
    let w = World::new();
    let repo = w.repo();
    std::fs::write(repo.join("a.txt"), "uncommitted\n").unwrap();
    let alice = w.add(&repo, "alice");
    assert_eq!(
        std::fs::read_to_string(alice.path.join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    let notices = alice.notices.join("\n");
    assert!(
        notices.contains("uncommitted changes (a.txt)") && notices.contains("from HEAD"),
        "{notices}"
    );
    w.sh(&repo, &["checkout", "-q", "--", "a.txt"]);

    w.sh(&repo, &["checkout", "-q", "--detach"]);
    let bob = w.add(&repo, "bob");
    assert!(
        bob.notices.join("\n").contains("detached HEAD"),
        "{:?}",
        bob.notices
    );
    w.commit_in(&bob.path, "c.txt", "sea\n", "bob adds c");
    let lead = w.lead(&repo);
    assert!(matches!(
        lead.merge(&name("team"), &name("bob")).unwrap(),
        MergeOutcome::Merged { .. }
    ));
    assert!(repo.join("c.txt").is_file());
}

#[test]
fn the_sandbox_grants_a_clone_no_git_dir_of_the_lead_and_a_submodule_its_own() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    // A teammate's clone has its own `.git` inside it: nothing of the lead's is granted.
    assert!(alice.path.join(".git").is_dir());
    assert!(roo_agent::exec::sandbox::linked_git_dirs(&alice.path).is_empty());
    // The main checkout's `.git` is inside it already.
    assert!(roo_agent::exec::sandbox::linked_git_dirs(&repo).is_empty());

    // A submodule checkout: its git dir lives in the superproject's.
    let lib = w.base.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    w.sh(&lib, &["init", "-q"]);
    w.sh(
        &lib,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "lib",
        ],
    );
    w.sh(
        &repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "vendor/lib",
        ],
    );
    let sub = repo.join("vendor/lib");
    let git_dir = PathBuf::from(
        w.sh(&sub, &["rev-parse", "--path-format=absolute", "--git-dir"])
            .trim(),
    );
    assert!(
        git_dir.starts_with(repo.join(".git/modules")),
        "{}",
        git_dir.display()
    );
    assert_eq!(
        roo_agent::exec::sandbox::linked_git_dirs(&sub),
        vec![git_dir.clone()]
    );

    // A teammate of a lead working in the submodule gets a clone of it, and no
    // grant of the submodule's git dir.
    let in_sub = w.add(&sub, "alice");
    assert_eq!(in_sub.path, sub.join(".roocode/worktrees/team+alice"));
    assert!(roo_agent::exec::sandbox::linked_git_dirs(&in_sub.path).is_empty());
    w.sh(&sub, &["config", "user.name", "Lead"]);
    w.sh(&sub, &["config", "user.email", "lead@example.invalid"]);
    w.sh(&in_sub.path, &["config", "user.name", "Alice"]);
    w.sh(
        &in_sub.path,
        &["config", "user.email", "alice@example.invalid"],
    );
    w.commit_in(&in_sub.path, "s.txt", "ess\n", "alice in the submodule");
    let lead = w.lead(&sub);
    assert!(matches!(
        lead.merge(&name("team"), &name("alice")).unwrap(),
        MergeOutcome::Merged { .. }
    ));
    assert!(sub.join("s.txt").is_file());
}

#[test]
fn teammates_can_be_given_worktrees_concurrently() {
    let w = World::new();
    let repo = w.repo();
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let (repo, git) = (repo.clone(), w.git.clone());
            std::thread::spawn(move || prepare(&repo, &name("team"), &name(&format!("m{i}")), &git))
        })
        .collect();
    for handle in handles {
        let ws = handle.join().unwrap().unwrap();
        assert!(ws.dir().join("a.txt").is_file(), "{ws:?}");
    }
    assert_eq!(
        w.sh(&repo, &["branch", "--list", "roo/team/*"])
            .lines()
            .count(),
        6
    );
}

#[tokio::test]
async fn the_leads_searches_do_not_see_teammates_worktrees() {
    let w = World::new();
    let repo = w.repo();
    let alice = w.add(&repo, "alice");
    std::fs::write(alice.path.join("found.txt"), "needle\n").unwrap();
    std::fs::write(repo.join("mine.txt"), "needle\n").unwrap();
    let ctx = ToolContext::new(repo.clone(), w.base.join("session"));
    let grep = roo_agent::tools::Grep
        .call(json!({"pattern": "needle"}), &ctx)
        .await;
    assert_eq!(grep.content, "mine.txt");
    let glob = roo_agent::tools::Glob
        .call(json!({"pattern": "**/*.txt"}), &ctx)
        .await;
    assert!(!glob.content.contains("found.txt"), "{}", glob.content);
    assert!(glob.content.contains("mine.txt"), "{}", glob.content);
}

#[test]
fn cleanup_keeps_switched_and_detached_clones_and_handles_deleted_ones() {
    let w = World::new();
    let repo = w.repo();
    let switched = w.add(&repo, "switched");
    w.sh(&switched.path, &["checkout", "-q", "-b", "side"]);
    let detached = w.add(&repo, "detached");
    w.sh(&detached.path, &["checkout", "-q", "--detach"]);
    w.commit_in(&detached.path, "d.txt", "dee\n", "on no branch");
    let stashed = w.add(&repo, "stashed");
    std::fs::write(stashed.path.join("a.txt"), "stashed work\n").unwrap();
    w.sh(&stashed.path, &["stash", "-q"]);
    let gone_merged = w.add(&repo, "gone1");
    let gone_work = w.add(&repo, "gone2");
    w.commit_in(&gone_work.path, "g.txt", "gee\n", "gone2 work");
    assert!(
        w.lead(&repo)
            .fetch_member(&name("team"), &name("gone2"))
            .unwrap()
    );
    std::fs::remove_dir_all(&gone_merged.path).unwrap();
    std::fs::remove_dir_all(&gone_work.path).unwrap();
    std::fs::create_dir_all(repo.join(".roocode/worktrees/team+stray")).unwrap();

    let report = w.lead(&repo).cleanup(&name("team")).unwrap();
    let why = |member: &str| {
        report
            .kept
            .iter()
            .find(|k| k.member == member)
            .map(|k| k.why.clone())
    };
    assert_eq!(
        why("switched"),
        Some(KeptWhy::OtherBranch(Some("refs/heads/side".to_string())))
    );
    assert_eq!(why("detached"), Some(KeptWhy::OtherBranch(None)));
    // A stash is two commits (the work tree's and the index's).
    assert_eq!(why("stashed"), Some(KeptWhy::OtherRefs(2)));
    let Some(KeptWhy::Changes(changes)) = why("gone2") else {
        panic!("{report:?}")
    };
    assert_eq!(changes.unmerged_count, 1);
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert_eq!(report.removed[0].member, "gone1");
    assert!(report.removed[0].branch_deleted);
    assert_eq!(
        report.strays,
        vec![repo.join(".roocode/worktrees/team+stray")]
    );
    assert!(switched.path.is_dir() && detached.path.is_dir() && stashed.path.is_dir());
    assert!(
        w.sh(&repo, &["branch", "--list", "roo/team/gone2"])
            .contains("gone2")
    );
    let lines = report.lines().join("\n");
    assert!(
        lines.contains("detached HEAD") && lines.contains("left"),
        "{lines}"
    );
}

fn write_file(path: &Path) -> serde_json::Value {
    json!({"path": path, "content": "written\n"})
}

#[tokio::test]
async fn a_teammates_file_tools_stay_in_its_own_worktree() {
    let w = World::new();
    let repo = w.repo();
    std::fs::create_dir_all(repo.join(".roocode")).unwrap();
    std::fs::write(
        repo.join(".roocode/config.yaml"),
        "permission_mode: default\n",
    )
    .unwrap();
    let alice = Workspace::Worktree(w.add(&repo, "alice"));
    let bob = w.add(&repo, "bob");
    let roots = TeammateRoots::of(&alice);
    assert_eq!(roots.work_root, repo.join(".roocode/worktrees/team+alice"));
    assert_eq!(roots.project_root, repo);

    let roo_home = w.base.join("roo");
    let session = w.base.join("session");
    std::fs::create_dir_all(&session).unwrap();
    let config =
        ConfigFiles::load(&roo_home, &roots.project_root, ProjectTrust::Untrusted).unwrap();
    let policy =
        teammate_policy(&roots, &config, Some(PermissionMode::AcceptEdits), &session).unwrap();
    let tool = WriteFile;
    let check = |path: &Path| policy.check(&tool, &write_file(path), &roots.work_root);

    // Its own files, despite `.roocode/worktrees/` in their path.
    assert_eq!(
        check(&roots.work_root.join("src/new.rs")),
        PermissionDecision::Allow
    );
    assert_eq!(check(Path::new("relative.txt")), PermissionDecision::Allow);
    // Its worktree's own `.roocode/` is still protected (asks).
    assert!(matches!(
        check(&roots.work_root.join(".roocode/config.local.yaml")),
        PermissionDecision::Ask(_)
    ));
    // The main repository's config, its files and a sibling are outside.
    for outside in [
        repo.join(".roocode/config.yaml"),
        repo.join(".roocode/config.local.yaml"),
        repo.join("a.txt"),
        bob.path.join("a.txt"),
        roots.work_root.join("../team+bob/a.txt"),
    ] {
        assert!(
            matches!(check(&outside), PermissionDecision::Deny { .. }),
            "{}",
            outside.display()
        );
    }

    // The tool itself, with the roots the loop hands it, refuses too.
    let ctx = ToolContext {
        allowed_roots: policy
            .allowed_roots()
            .into_iter()
            .map(Path::to_path_buf)
            .collect(),
        ..ToolContext::new(roots.work_root.clone(), session.clone())
    };
    let own = tool
        .call(write_file(&roots.work_root.join("own.txt")), &ctx)
        .await;
    assert!(!own.is_error, "{}", own.content);
    for outside in [repo.join(".roocode/config.yaml"), bob.path.join("b.txt")] {
        let before = std::fs::read_to_string(&outside).unwrap();
        let out = tool.call(write_file(&outside), &ctx).await;
        assert!(out.is_error, "{}: {}", outside.display(), out.content);
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), before);
    }
}

#[test]
fn the_shared_git_dir_is_granted_only_when_the_checkout_confirms_what_git_reports() {
    let world = World::new();
    let repo = world.repo();
    let expect = std::fs::canonicalize(repo.join(".git")).unwrap();
    // A plain checkout: its `.git` directory, from the repository or a subdirectory.
    std::fs::create_dir_all(repo.join("sub/deeper")).unwrap();
    for cwd in [repo.clone(), repo.join("sub/deeper")] {
        match LeadRepo::discover(&cwd, &world.git).unwrap() {
            Discovered::Repo(lead) => assert_eq!(lead.git_dir(), Some(expect.as_path())),
            other => panic!("{other:?}"),
        }
    }
    // A lead working in a linked worktree: the verified common directory.
    let linked = world.base.join("linked");
    world.sh(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            linked.to_str().unwrap(),
        ],
    );
    match LeadRepo::discover(&linked, &world.git).unwrap() {
        Discovered::Repo(lead) => assert_eq!(lead.git_dir(), Some(expect.as_path())),
        other => panic!("{other:?}"),
    }
    // A `.git` file someone wrote to point at another repository: git follows it, but
    // the other repository names no such worktree, so nothing is granted and the
    // worktree is not planned ahead.
    let other = world.base.join("other");
    std::fs::create_dir_all(&other).unwrap();
    world.sh(&other, &["init", "-q", "-b", "main"]);
    world.sh(
        &other,
        &[
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    );
    let planted = world.base.join("planted");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(
        planted.join(".git"),
        format!("gitdir: {}\n", other.join(".git").display()),
    )
    .unwrap();
    match LeadRepo::discover(&planted, &world.git).unwrap() {
        Discovered::Repo(lead) => {
            assert_eq!(lead.git_dir(), None);
            assert_eq!(lead.planned_worktree(&name("t"), &name("dave")), None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_held_worktrees_lock_is_an_error_naming_the_file_after_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let held = lock_worktrees(dir.path()).unwrap();
    let start = std::time::Instant::now();
    let err = lock_worktrees_within(dir.path(), std::time::Duration::from_millis(200))
        .unwrap_err()
        .to_string();
    assert!(start.elapsed() >= std::time::Duration::from_millis(200));
    assert!(err.contains(".lock") && err.contains("held it"), "{err}");
    drop(held);
    // Free again: taken at once.
    lock_worktrees_within(dir.path(), std::time::Duration::ZERO).unwrap();
}

#[test]
fn the_clone_gets_the_leads_identity_written_by_the_clone_itself() {
    let w = World::new();
    let repo = w.repo();
    let config = |dir: &Path, key: &str| {
        let out = Command::new("git")
            .args(["config", "--get", key])
            .current_dir(dir)
            .env("HOME", w.base.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    // A multi-valued name (the last one is what git commits with), an `=` and spaces.
    w.sh(&repo, &["config", "--add", "user.name", "Old Name"]);
    w.sh(&repo, &["config", "--add", "user.name", "Lead = Name "]);
    let alice = w.add(&repo, "alice");
    assert_eq!(
        config(&alice.path, "user.name").as_deref(),
        Some("Lead = Name \n")
    );
    assert_eq!(
        config(&alice.path, "user.email").as_deref(),
        Some("roo@example.invalid\n")
    );
    // No identity: none is invented for the clone.
    w.sh(&repo, &["config", "--unset-all", "user.name"]);
    w.sh(&repo, &["config", "--unset-all", "user.email"]);
    let bob = w.add(&repo, "bob");
    assert_eq!(config(&bob.path, "user.name"), None);
    assert_eq!(config(&bob.path, "user.email"), None);
}

#[test]
fn discovery_reads_no_object_and_a_planted_fifo_cannot_hold_it() {
    let w = World::new();
    let repo = w.repo();
    // HEAD names a commit that is not there: discovery (refs only) finds the repository,
    // and making the clone (which checks HEAD's commit, confined) fails and leaves nothing.
    std::fs::write(
        repo.join(".git/refs/heads/ghost"),
        format!("{}\n", "1".repeat(40)),
    )
    .unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/ghost\n").unwrap();
    let lead = w.lead(&repo);
    let err = lead
        .add_worktree(&name("team"), &name("alice"))
        .unwrap_err();
    assert!(err.to_string().contains("rev-parse"), "{err}");
    assert!(!lead.worktree_path(&name("team"), &name("alice")).exists());

    // A FIFO as HEAD would block git's read forever: discovery gives up within its limit,
    // and says so (teammates never fall back to sharing the lead's tree on a timeout).
    std::fs::remove_file(repo.join(".git/HEAD")).unwrap();
    nix::unistd::mkfifo(
        &repo.join(".git/HEAD"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let found = LeadRepo::discover(&repo, &w.git);
    assert!(
        started.elapsed() < DISCOVERY_LIMIT * 2,
        "{:?}",
        started.elapsed()
    );
    let err = found.unwrap_err().to_string();
    assert!(err.contains("took longer than"), "{err}");
}

/// What a teammate of a team left behind holds is listed: its new commit (fetched),
/// its uncommitted and its git-ignored files; a clone whose config includes another file
/// is named, and nothing is run in it.
#[test]
fn left_work_lists_a_clones_commits_and_files_and_reads_no_refused_clone() {
    let w = World::new();
    let repo = w.repo();
    std::fs::write(repo.join(".gitignore"), "*.log\n").unwrap();
    w.sh(&repo, &["add", ".gitignore"]);
    w.sh(&repo, &["commit", "-q", "-m", "ignore logs"]);
    let lead = w.lead(&repo);
    let alice = w.add(&repo, "alice");
    w.commit_in(&alice.path, "c.txt", "c\n", "alice: c");
    std::fs::write(alice.path.join("draft.txt"), "d\n").unwrap();
    std::fs::write(alice.path.join("notes.log"), "secret\n").unwrap();
    let left = lead.left_work(&name("team"), &name("alice")).unwrap();
    assert_eq!(left.clone.as_deref(), Some(alice.path.as_path()));
    assert_eq!(left.branch, "roo/team/alice");
    assert_eq!(left.changes.unmerged_count, 1, "{left:?}");
    assert_eq!(left.changes.unmerged[0].subject, "alice: c");
    assert_eq!(left.changes.uncommitted, vec!["?? draft.txt".to_string()]);
    assert_eq!(left.ignored, vec!["!! notes.log".to_string()]);
    assert!(left.unread.is_none(), "{left:?}");

    let bob = w.add(&repo, "bob");
    std::fs::write(bob.path.join("draft.txt"), "d\n").unwrap();
    w.sh(
        &bob.path,
        &["config", "include.path", "/nonexistent/roo-include"],
    );
    let left = lead.left_work(&name("team"), &name("bob")).unwrap();
    let unread = left.unread.clone().unwrap_or_default();
    assert!(unread.contains("config include"), "{left:?}");
    assert!(
        left.changes.uncommitted.is_empty() && left.ignored.is_empty(),
        "{left:?}"
    );
    assert!(!left.is_empty());
}

#[test]
fn a_new_clone_borrows_the_leads_objects_and_hardlinks_none_of_them() {
    use std::os::unix::fs::MetadataExt;
    let w = World::new();
    let repo = w.repo();
    // Packed and loose objects both.
    w.sh(&repo, &["gc", "-q"]);
    w.commit_in(&repo, "c.txt", "sea\n", "loose");
    let files = |dir: &Path| {
        let mut found = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(dir) = todo.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                let meta = std::fs::symlink_metadata(entry.path()).unwrap();
                if meta.is_dir() {
                    todo.push(entry.path());
                } else {
                    found.push((entry.path(), meta));
                }
            }
        }
        found
    };
    let lead: std::collections::HashSet<(u64, u64)> = files(&repo.join(".git/objects"))
        .iter()
        .map(|(_, m)| (m.dev(), m.ino()))
        .collect();
    let alice = w.add(&repo, "alice");
    // A teammate could write through a hardlink into the lead's object store: none.
    for (path, meta) in files(&alice.path.join(".git")) {
        assert!(
            !lead.contains(&(meta.dev(), meta.ino())),
            "{} is a hardlink of the lead's object",
            path.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(alice.path.join(".git/objects/info/alternates")).unwrap(),
        format!("{}\n", repo.join(".git/objects").display())
    );
    assert_eq!(w.head(&alice.path), w.head(&repo));
}
