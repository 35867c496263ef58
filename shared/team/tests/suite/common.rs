//! Test helpers: a temp home with a team, and the built `roo-mail` binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use roo_agent::tool::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};
use roo_store::{Member, Name, RooHome, Team};
use roo_team::{AgentSettings, Identity, SessionPlan, ToolSet};
use serde_json::{Value, json};

pub fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

/// A temp `ROO_HOME` holding team `t` with members lead, alice and bob.
pub struct TeamHome {
    pub dir: tempfile::TempDir,
    pub team: Team,
}

impl TeamHome {
    pub fn new() -> TeamHome {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let t = name("t");
        let team = Team::create(
            &home,
            t.clone(),
            "router tests",
            Member::new(name("lead"), &t),
            vec![Member::new(name("alice"), &t), Member::new(name("bob"), &t)],
        )
        .unwrap();
        // The tests act as alice and bob: joined (a join records `is_active`), so busy
        // rather than roster entries that never started.
        team.set_active("alice", true).unwrap();
        team.set_active("bob", true).unwrap();
        TeamHome { dir, team }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `roo-mail send --as FROM --to TO --type KIND REST…` from another process.
    pub fn send(&self, from: &str, to: &str, kind: &str, rest: &[&str]) {
        let mut args = vec!["send", "--as", from, "--to", to, "--type", kind];
        args.extend_from_slice(rest);
        self.mail(&args);
    }

    /// Answers `to`'s question as the lead's process does: `answer` signed with the
    /// team's lead key (made on first use).
    pub fn answer(&self, to: &str, answer: roo_store::MessageBody) {
        let key = roo_team::authority::LeadKey::load_or_create(&self.team).unwrap();
        let recipient = name(to);
        let signed = roo_team::authority::Answer::of(self.team.name(), &recipient, &answer)
            .expect("a permission or plan answer");
        let signature = key.sign(&signed);
        self.team
            .mailbox()
            .send(
                &name("lead"),
                to,
                roo_store::Outgoing::new(answer, "").with_signature(signature),
            )
            .unwrap();
    }

    /// Runs `roo-mail ARGS` as another process would, with this home and team.
    pub fn mail(&self, args: &[&str]) {
        let out = Command::new(roo_mail())
            .args(args)
            .env("ROO_HOME", self.path())
            .env("ROO_TEAM", "t")
            .env_remove("ROO_AGENT_NAME")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "roo-mail {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The `roo-mail` binary of this build (`cargo build --bins` builds it; `scripts/test`
/// does so first).
pub fn roo_mail() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("roo-mail");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first",
        bin.display()
    );
    bin
}

/// A work step, logged by its `api` input. With `"mail": true` it has bob write to
/// alice's inbox through a `roo-mail` process while it runs (a message arriving in the
/// middle of a busy run); with `"mail": [ARGS…]` it runs `roo-mail send --team t ARGS…`.
pub struct Step {
    pub home: PathBuf,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Tool for Step {
    fn name(&self) -> &str {
        "Step"
    }
    fn description(&self) -> String {
        "one step of work".to_string()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        false
    }
    fn permission_target(&self, _: &Value) -> PermissionTarget {
        PermissionTarget::None
    }
    fn call<'a>(&'a self, input: Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let api = input["api"].as_str().unwrap_or("v1").to_string();
            self.log.lock().unwrap().push(api.clone());
            let args: Option<Vec<String>> = match &input["mail"] {
                Value::Bool(true) => Some(
                    [
                        "--as",
                        "bob",
                        "--to",
                        "alice",
                        "--summary",
                        "switch to the v2 API",
                        "use the v2 API from now on",
                    ]
                    .map(String::from)
                    .to_vec(),
                ),
                Value::Array(args) => Some(
                    args.iter()
                        .map(|a| a.as_str().unwrap().to_string())
                        .collect(),
                ),
                _ => None,
            };
            if let Some(args) = args {
                let home = self.home.clone();
                let out = tokio::task::spawn_blocking(move || {
                    Command::new(roo_mail())
                        .args(["send", "--team", "t"])
                        .args(args)
                        .env("ROO_HOME", home)
                        .output()
                })
                .await
                .unwrap()
                .unwrap();
                assert!(out.status.success(), "{out:?}");
            }
            ToolOutput::ok(format!("api {api} step done"))
        })
    }
}

/// Settings of teammate alice of team `t` with the scripted provider replaying
/// `script`, the `Step` tool (its log returned) and her transcript under the team.
pub fn alice_settings(
    home: &TeamHome,
    cwd: &Path,
    script: &str,
    max_turns: u32,
) -> (AgentSettings, Arc<Mutex<Vec<String>>>) {
    let script_path = home.path().join("script.yaml");
    std::fs::write(&script_path, script).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut settings = AgentSettings::new(
        Identity::teammate(name("alice"), name("t"), name("lead")),
        home.path().to_path_buf(),
    );
    settings.cwd = Some(cwd.to_path_buf());
    settings.llm.script = Some(script_path);
    settings.session = SessionPlan::member(home.path(), &name("t"), &name("alice"));
    settings.tools = ToolSet {
        extra: vec![Arc::new(Step {
            home: home.path().to_path_buf(),
            log: log.clone(),
        })],
        ..ToolSet::default()
    };
    settings.max_turns = max_turns;
    (settings, log)
}

/// The scripted provider replaying `script`, recording the last user message of every
/// request it gets (so a test can count model requests and read what each carried).
pub struct Recording {
    inner: roo_llm::ScriptProvider,
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl Recording {
    pub fn new(script_path: &Path) -> Arc<Recording> {
        let player = roo_llm::script::ScriptPlayer::load(script_path, None).unwrap();
        Arc::new(Recording {
            inner: roo_llm::ScriptProvider::new(player, "script", 200_000),
            requests: Arc::new(Mutex::new(Vec::new())),
        })
    }

    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

impl roo_llm::Provider for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn context_window(&self) -> u64 {
        self.inner.context_window()
    }
    fn stream(&self, request: roo_llm::Request) -> roo_llm::EventStream {
        let query = roo_llm::script::ScriptQuery::from_request(&request);
        self.requests.lock().unwrap().push(query.last_user);
        self.inner.stream(request)
    }
}
