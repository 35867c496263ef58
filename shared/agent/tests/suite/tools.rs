//! The built-in tools through the registry, in a real git project.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use roo_agent::permissions::{PermissionDecision, PermissionMode, PermissionPolicy, RuleSet};
use roo_agent::tool::{Tool, ToolRegistry};
use roo_agent::tools::{WriteFile, builtin_tools, spill_if_large};
use serde_json::json;

use super::common::{Workspace, wait_until};

fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    for tool in builtin_tools() {
        registry.register(tool);
    }
    registry
}

#[tokio::test]
async fn find_read_edit_and_verify_a_bug_fix() {
    let ws = Workspace::new();
    let ctx = ws.context(100_000);
    let tools = registry();
    let call = |name: &str, input: serde_json::Value| {
        let tool = tools.get(name).unwrap().clone();
        let ctx = ctx.clone();
        async move { tool.call(input, &ctx).await }
    };

    let found = call("Grep", json!({"pattern": "a - b"})).await;
    assert_eq!(found.content, "src/lib.rs", "target/ is gitignored");
    let files = call("Glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(files.content, "src/lib.rs");

    let read = call("ReadFile", json!({"path": "src/lib.rs"})).await;
    assert_eq!(
        read.content,
        "     1\tpub fn add(a: u32, b: u32) -> u32 {\n     2\t    a - b\n     3\t}"
    );
    let edit = call(
        "EditFile",
        json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
    )
    .await;
    assert!(!edit.is_error, "{}", edit.content);
    assert!(
        edit.content.contains("     2\t    a + b"),
        "{}",
        edit.content
    );

    let check = call(
        "Bash",
        json!({"command": "grep -c 'a + b' src/lib.rs && git status --porcelain", "description": "Check the fix"}),
    )
    .await;
    assert!(!check.is_error, "{}", check.content);
    assert!(check.content.starts_with("1\n"), "{}", check.content);
    assert!(check.content.contains("src/"), "{}", check.content);
    assert!(check.content.ends_with("[exit code 0]"));

    let written = call(
        "WriteFile",
        json!({"path": "src/new.rs", "content": "pub const X: u8 = 1;\n"}),
    )
    .await;
    assert_eq!(written.content, "Created src/new.rs (1 lines).");
}

#[tokio::test]
async fn spilled_results_can_be_read_back_through_the_sandbox() {
    let ws = Workspace::new();
    let ctx = ws.context(4_000);
    let tools = registry();
    let bash = tools.get("Bash").unwrap();
    let out = bash
        .call(json!({"command": "seq 1 3000 | sed 's/^/row /'"}), &ctx)
        .await;
    assert!(out.content.len() > 4_000);
    let spilled = spill_if_large(out, "toolu_01", &ctx);
    let saved = ws.session.join("tool-results/toolu_01.txt");
    assert!(spilled.content.contains(&saved.display().to_string()));
    assert!(spilled.content.contains("row 1\n"));
    assert!(spilled.content.contains("row 3000"));
    assert!(!spilled.content.contains("row 1500\n"));

    // The model follows the hint: ReadFile on the saved path, with an offset.
    let read_file = tools.get("ReadFile").unwrap();
    let input = json!({"path": saved, "offset": 1500, "limit": 1});
    let mut policy =
        PermissionPolicy::new(ws.project.clone(), PermissionMode::Default, RuleSet::new());
    assert!(matches!(
        policy.check(read_file.as_ref(), &input, &ctx.cwd),
        PermissionDecision::Deny { .. }
    ));
    policy.add_allowed_root(ws.session.clone());
    assert_eq!(
        policy.check(read_file.as_ref(), &input, &ctx.cwd),
        PermissionDecision::Allow
    );
    // The loop hands the tools the roots the policy judged against.
    let mut ctx = ctx;
    ctx.allowed_roots = policy
        .allowed_roots()
        .into_iter()
        .map(|p| p.to_path_buf())
        .collect();
    let middle = read_file.call(input, &ctx).await;
    assert!(
        middle.content.starts_with("  1500\trow 1500\n"),
        "{}",
        middle.content
    );
}

#[tokio::test]
async fn cancelling_a_bash_call_kills_its_children() {
    let ws = Workspace::new();
    let ctx = ws.context(100_000);
    let tools = registry();
    let bash = tools.get("Bash").unwrap().clone();
    let cancel = ctx.cancel.clone();
    let marker = ws.project.join("started");
    let canceller = tokio::spawn(async move {
        wait_until("the command to start", || marker.exists()).await;
        cancel.cancel();
    });
    let out = bash
        .call(
            json!({"command": "sleep 300 & echo child=$!; touch started; wait"}),
            &ctx,
        )
        .await;
    canceller.await.unwrap();
    assert!(out.is_error);
    assert!(
        out.content.contains("[cancelled by the user"),
        "{}",
        out.content
    );
    let pid: u32 = out
        .content
        .lines()
        .find_map(|l| l.strip_prefix("child="))
        .unwrap()
        .parse()
        .unwrap();
    wait_until("the child sleep to be gone", || !roo_store::pid_alive(pid)).await;
}

/// The check/use race on a path: a symlink inside the project flipped between a
/// directory inside and one outside while WriteFile calls run, each checked by
/// the policy first exactly as the loop does. Before file tools opened paths
/// through directory handles, about one allowed write in ten landed outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_flipped_during_writes_never_leads_a_write_outside_the_project() {
    let ws = Workspace::new();
    let outside = ws.project.parent().unwrap().join("outside");
    let inside = ws.project.join("real");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(&inside).unwrap();
    let link = ws.project.join("d");
    std::os::unix::fs::symlink(&inside, &link).unwrap();

    let policy = PermissionPolicy::new(
        ws.project.clone(),
        PermissionMode::BypassPermissions,
        RuleSet::new(),
    );
    let mut ctx = ws.context(100_000);
    ctx.allowed_roots = policy
        .allowed_roots()
        .into_iter()
        .map(|p| p.to_path_buf())
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let flips = Arc::new(AtomicUsize::new(0));
    let flipper = {
        let (stop, flips) = (stop.clone(), flips.clone());
        let (project, outside, inside) = (ws.project.clone(), outside.clone(), inside.clone());
        std::thread::spawn(move || {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let target = if i.is_multiple_of(2) {
                    &outside
                } else {
                    &inside
                };
                let temp = project.join(format!(".flip{i}"));
                std::os::unix::fs::symlink(target, &temp).unwrap();
                std::fs::rename(&temp, project.join("d")).unwrap();
                flips.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        })
    };
    // 1,000 writes the policy allowed, each racing the flips.
    let (mut allowed, mut written) = (0, 0);
    for i in 0..1_000_000 {
        if allowed == 1000 {
            break;
        }
        let input = json!({"path": format!("d/f{i}.txt"), "content": "x"});
        if policy.check(&WriteFile, &input, &ws.project) != PermissionDecision::Allow {
            continue;
        }
        allowed += 1;
        if !WriteFile.call(input, &ctx).await.is_error {
            written += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();

    let escaped: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        escaped.is_empty(),
        "{} of {allowed} allowed writes landed outside the project: {escaped:?}",
        escaped.len()
    );
    assert_eq!(allowed, 1000);
    assert!(
        flips.load(Ordering::Relaxed) > 100,
        "the link kept flipping"
    );
    assert!(
        written > 0,
        "some writes went through while the link pointed inside"
    );
}

/// `~/x` is the home directory's `x`, judged (and denied) as outside the
/// project; it never becomes a directory named `~` inside it.
#[tokio::test]
async fn a_tilde_path_is_the_home_directory_not_a_tilde_directory() {
    let ws = Workspace::new();
    let policy = PermissionPolicy::new(
        ws.project.clone(),
        PermissionMode::BypassPermissions,
        RuleSet::new(),
    );
    let tools = registry();
    for (tool, input) in [
        ("WriteFile", json!({"path": "~/x.txt", "content": "x"})),
        (
            "EditFile",
            json!({"path": "~/x.txt", "old_string": "a", "new_string": "b"}),
        ),
        ("ReadFile", json!({"path": "~/.bashrc"})),
        ("Glob", json!({"pattern": "*", "path": "~"})),
        ("Grep", json!({"pattern": "x", "path": "~/"})),
    ] {
        let tool = tools.get(tool).unwrap();
        let decision = policy.check(tool.as_ref(), &input, &ws.project);
        assert!(
            matches!(&decision, PermissionDecision::Deny { reason } if reason.contains("outside the project")),
            "{}: {decision:?}",
            tool.name()
        );
        // The tools, even called without the policy, refuse it: it is outside
        // their roots.
        let out = tool.call(input, &ws.context(100_000)).await;
        assert!(out.is_error, "{}: {}", tool.name(), out.content);
        assert!(out.content.contains("outside"), "{}", out.content);
    }
    assert!(!ws.project.join("~").exists());
}

/// The same race against a search: Grep on a path whose symlink flips between a
/// directory inside the project and one outside holding a secret. The search
/// starts from the path resolved and checked again, never from the link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_flipped_during_searches_never_leads_a_search_outside_the_project() {
    let ws = Workspace::new();
    let outside = ws.project.parent().unwrap().join("outside");
    let inside = ws.project.join("real");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::write(outside.join("secret.txt"), "TOKEN=outside-secret\n").unwrap();
    std::fs::write(inside.join("notes.txt"), "TOKEN=inside\n").unwrap();
    std::os::unix::fs::symlink(&inside, ws.project.join("d")).unwrap();

    let policy = PermissionPolicy::new(ws.project.clone(), PermissionMode::Default, RuleSet::new());
    let mut ctx = ws.context(100_000);
    ctx.allowed_roots = policy
        .allowed_roots()
        .into_iter()
        .map(|p| p.to_path_buf())
        .collect();
    let grep = roo_agent::tools::Grep;

    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let (project, outside, inside) = (ws.project.clone(), outside.clone(), inside.clone());
        std::thread::spawn(move || {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let target = if i.is_multiple_of(2) {
                    &outside
                } else {
                    &inside
                };
                let temp = project.join(format!(".flip{i}"));
                std::os::unix::fs::symlink(target, &temp).unwrap();
                std::fs::rename(&temp, project.join("d")).unwrap();
                i += 1;
            }
        })
    };
    let input = json!({"pattern": "TOKEN", "path": "d", "output_mode": "content"});
    let (mut allowed, mut leaked) = (0, Vec::new());
    for _ in 0..1_000_000 {
        if allowed == 300 {
            break;
        }
        if policy.check(&grep, &input, &ws.project) != PermissionDecision::Allow {
            continue;
        }
        allowed += 1;
        let out = grep.call(input.clone(), &ctx).await;
        if out.content.contains("outside-secret") {
            leaked.push(out.content);
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert_eq!(allowed, 300);
    assert!(
        leaked.is_empty(),
        "{} of {allowed} allowed searches read outside: {:?}",
        leaked.len(),
        leaked.first()
    );
}
