//! The config's hooks inside an in-process teammate: the builder every agent goes
//! through adds them, so a teammate's tool calls pass its pre/post hooks (commands in
//! the real OS sandbox, through `roo-worker`'s helper mode), and the team runtime fires
//! `task_completed` and `teammate_idle`.

use futures_util::future::BoxFuture;
use roo_agent::tool::{Tool, ToolContext, ToolKind, ToolOutput};
use roo_store::{ClaimOptions, NewTask, TaskId, TaskList, TaskPatch, TaskStatus};
use serde_json::{Value, json};

use super::common::{TeamHome, name};
use super::teammate::{eventually, spawn_alice};

/// Completes one task, as TaskUpdate would.
struct Finish {
    tasks: TaskList,
    id: TaskId,
}

impl Tool for Finish {
    fn name(&self) -> &str {
        "Finish"
    }
    fn description(&self) -> String {
        "completes the task".to_string()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn call<'a>(&'a self, _: Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let patch = TaskPatch {
                status: Some(TaskStatus::Completed),
                by: Some(name("alice")),
                ..TaskPatch::default()
            };
            match self.tasks.update(&self.id, patch) {
                Ok(_) => ToolOutput::ok("completed"),
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

const SCRIPT: &str = r#"
agents:
  alice:
    - text: "Working."
      tool_calls:
        - {name: Step, input: {api: hooks}}
        - {name: WriteFile, input: {path: blocked.txt, content: "x"}}
        - {name: Finish, input: {}}
    - text: "Done."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_run_inside_an_in_process_teammate_and_for_team_events() {
    let home = TeamHome::new();
    std::fs::write(
        home.path().join("config.yaml"),
        r#"
hooks:
  - event: pre_tool_use
    if: tool == "WriteFile"
    action: {type: command, command: 'echo "no writes from $AGENT_NAME of $TEAM_NAME" >&2; exit 1'}
  - event: post_tool_use
    if: tool == "Step"
    action: {type: command, command: 'echo "post $AGENT_NAME $TOOL_NAME" >> hooks.log'}
  - event: task_completed
    action: {type: command, command: 'echo "completed $TASK_ID $TASK_SUBJECT by $TEAMMATE_NAME" >> hooks.log'}
  - event: teammate_idle
    action: {type: command, command: 'echo "idle $TEAMMATE_NAME" >> hooks.log'}
"#,
    )
    .unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let tasks = home.team.tasks();
    let task = tasks
        .create(NewTask {
            subject: "mine".to_string(),
            ..NewTask::default()
        })
        .unwrap();
    tasks
        .claim(&task.id, &name("alice"), &ClaimOptions::default())
        .unwrap();
    let finish = Finish {
        tasks: home.team.tasks(),
        id: task.id.clone(),
    };
    let (_handle, log, _events) = spawn_alice(&home, cwd.path(), SCRIPT, "go", |spec| {
        spec.settings.tools.extra.push(std::sync::Arc::new(finish));
        // Hook commands run in the OS sandbox through a built binary's helper mode.
        let worker = super::common::roo_mail().with_file_name("roo-worker");
        spec.settings.sandbox_helper = Some(worker);
    })
    .await;
    let hooks_log = cwd.path().join("hooks.log");
    let text = eventually("the teammate_idle hook", || {
        let text = std::fs::read_to_string(&hooks_log).ok()?;
        text.contains("idle alice").then_some(text)
    })
    .await;
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        vec![
            "post alice Step".to_string(),
            format!("completed {} mine by alice", task.id),
            "idle alice".to_string(),
        ]
    );
    assert_eq!(log.lock().unwrap().as_slice(), ["hooks"]);
    assert!(
        !cwd.path().join("blocked.txt").exists(),
        "the pre_tool_use hook blocked the write"
    );
    let transcript = std::fs::read_to_string(
        roo_store::RooHome::new(home.path()).transcript(&name("t"), &name("alice")),
    )
    .unwrap();
    assert!(
        transcript.contains("no writes from alice of t"),
        "the model got the hook's stderr"
    );
}
