//! The team runtime on the PostgreSQL store (issue 21): `roo-lead` and `roo-worker` run
//! a team job with `ROO_STORE` naming the test server, in real tmux panes and in-process.
//! Nothing of the team lands in files; the store's URL reaches the pane workers through
//! the handoff, never a command line, and the commands the model runs never see it,
//! while `roo-mail` in them (relayed by their agent) reaches the same store.
//!
//! Skipped without `ROO_TEST_PG_DSN` (`scripts/test` starts a throwaway server).

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::{Name, PgStore, RooHome, TaskId, TaskStatus, Team};
use roo_tests::{MockLlm, TempDir, TestCommand, Tmux, bin, path_with_bins, wait_until};

use super::team_panes::{ArgvSampler, LEAD, TEAMMATES, workers_under};

struct World {
    root: TempDir,
    url: String,
}

impl World {
    fn new() -> Option<World> {
        let url = roo_tests::pg::store_url()?;
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write("project/a.txt", "The word is quokka.\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        Some(World { root, url })
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    /// The team `crew` as the store holds it, if it exists.
    fn team(&self) -> Option<Team> {
        let home =
            RooHome::new(self.root.join("roo")).with_store(PgStore::connect(&self.url).unwrap());
        Team::open(&home, Name::parse_as("team", "crew").unwrap()).ok()
    }

    /// The protocol documents the file store under `ROO_HOME` holds (team configs,
    /// inboxes, task lists); the team's local files (the lead's key, transcripts, logs)
    /// are not among them.
    fn files_of_teams(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if path.is_dir() {
                    if name == "inboxes" {
                        found.push(path.clone());
                    }
                    walk(&path, found);
                } else if name == "config.json" || name == "tasks.json" {
                    found.push(path);
                }
            }
        }
        let mut found = Vec::new();
        for dir in ["teams", "tasks"] {
            walk(&self.root.join("roo").join(dir), &mut found);
        }
        found
    }

    fn output(&self) -> String {
        let logs: String = std::fs::read_dir(self.root.join("roo/teams/crew/logs"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                format!("{:?}:\n{text}\n", e.file_name())
            })
            .collect();
        format!(
            "stdout:\n{}\nstderr:\n{}\nlogs:\n{logs}",
            std::fs::read_to_string(self.root.join("lead.out")).unwrap_or_default(),
            std::fs::read_to_string(self.root.join("lead.err")).unwrap_or_default(),
        )
    }
}

#[test]
fn a_team_of_pane_workers_runs_on_the_postgresql_store_and_its_commands_never_see_the_url() {
    let Some(world) = World::new() else { return };
    // Alice's command writes what it sees of the store and what `roo-mail` shows.
    let seen = std::env::temp_dir().join(format!(
        "roo-pg-store-seen-{}-{}",
        std::process::id(),
        world.root.path().file_name().unwrap().to_string_lossy()
    ));
    let shown = PathBuf::from(format!("{}.shown", seen.display()));
    let teammates = TEAMMATES.replace(
        r#"printf %s \"$EXTRA_SERVICE_API_KEY\" > KEYFILE"#,
        &format!(
            r#"printf %s \"${{ROO_STORE:-unset}}/${{PGPASSWORD:-unset}}\" > {} && roo-mail team show > {}"#,
            seen.display(),
            shown.display()
        ),
    );
    assert_ne!(teammates, TEAMMATES, "the script changed");
    let script = world.root.write(
        "script.yaml",
        format!(
            "agents:\n{}{}",
            LEAD.trim_start_matches('\n'),
            teammates.trim_start_matches('\n')
        ),
    );
    // The URL names a schema of this test alone: it is what must not leak.
    let schema = world
        .url
        .rsplit("search_path%3D")
        .next()
        .unwrap()
        .to_string();
    let sampler = ArgvSampler::start(Box::leak(schema.clone().into_boxed_str()));
    world.root.write("store-url", &world.url);
    let run = world.root.write(
        "run-lead.sh",
        format!(
            "PATH='{path}'\nexport PATH\n\
             ROO_STORE=\"$(cat '{url}')\"\nexport ROO_STORE\n\
             PGPASSWORD=pw-canary-e41\nexport PGPASSWORD\n\
             '{lead}' -p 'Ship a.txt and b.txt with two pane teammates.' \
             --provider script --script '{script}' --permission-mode bypassPermissions \
             --output-format stream-json --teammate-mode tmux --team-timeout 120 \
             > '{out}' 2> '{err}'\necho $? > '{code}.part' && mv '{code}.part' '{code}'\n",
            path = path_with_bins(),
            url = world.root.join("store-url").display(),
            lead = bin("roo-lead").display(),
            script = script.display(),
            out = world.root.join("lead.out").display(),
            err = world.root.join("lead.err").display(),
            code = world.root.join("lead.code").display(),
        ),
    );
    let env = [
        ("ROO_HOME", world.root.join("roo").display().to_string()),
        ("HOME", world.root.join("home").display().to_string()),
        ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
    ];
    let tmux = Tmux::start(&world.project(), &env, &format!("sh '{}'", run.display()));

    // Both workers join the team in the store, each with its pane's pid.
    wait_until(
        "alice and bob joined the team in PostgreSQL",
        Duration::from_secs(60),
        || {
            let panes = tmux.panes();
            let config = world.team()?.config().ok()?;
            ["alice", "bob"]
                .iter()
                .all(|name| {
                    let pane = panes.iter().find(|p| p.title == *name);
                    pane.is_some_and(|p| config.member(name).is_some_and(|m| m.pid == Some(p.pid)))
                })
                .then_some(())
        },
        || format!("{}\n{}", tmux.all_screens(), world.output()),
    );
    assert!(
        world.files_of_teams().is_empty(),
        "the team is in files: {:?}",
        world.files_of_teams()
    );

    let code = wait_until(
        "the lead to exit",
        Duration::from_secs(120),
        || {
            std::fs::read_to_string(world.root.join("lead.code"))
                .ok()?
                .trim()
                .parse::<i32>()
                .ok()
        },
        || format!("{}\n{}", tmux.all_screens(), world.output()),
    );
    let (hits, rounds) = sampler.finish();
    assert_eq!(code, 0, "{}", world.output());

    // The job went through the store: bob's report woke the lead, both branches merged,
    // the team deleted from the store, and no file of it was ever written.
    let out = std::fs::read_to_string(world.root.join("lead.out")).unwrap();
    assert!(
        out.contains(r#""from":"bob""#) && out.contains("both done"),
        "{}",
        world.output()
    );
    for file in ["a.txt", "b.txt"] {
        assert!(world.project().join(file).is_file(), "{file} merged");
    }
    assert!(world.team().is_none(), "the lead deleted the team");
    assert!(world.files_of_teams().is_empty());
    assert_eq!(workers_under(world.root.path()), Vec::<String>::new());

    // Alice's command: no store URL and no password in its environment; `roo-mail` in it
    // showed the team from the store.
    let seen_text = std::fs::read_to_string(&seen).unwrap_or_default();
    let _ = std::fs::remove_file(&seen);
    assert_eq!(seen_text, "unset/unset");
    let shown_text = std::fs::read_to_string(&shown).unwrap_or_default();
    let _ = std::fs::remove_file(&shown);
    let shown = shown_text;
    assert!(
        shown.contains("alice@crew") && shown.contains("bob@crew"),
        "{shown}"
    );
    assert!(rounds > 10, "the sampler ran");
    assert!(
        hits.is_empty(),
        "the store URL was on a command line: {hits:#?}"
    );
}

#[test]
fn an_in_process_teammate_works_on_the_postgresql_store() {
    let Some(world) = World::new() else { return };
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - when: {system_contains: "You are alice, a RooCode teammate"}
      tool_calls:
        - {name: Bash, input: {command: "roo-mail team show"}}
        - {name: TaskUpdate, input: {id: "1", status: completed}}
    - when: {system_contains: "You are alice, a RooCode teammate"}
      text: "Task 1 is done."
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, description: "find the word", task: true, prompt: "Complete your task."}}
    - text: "alice is on it."
    - tool_calls:
        - {name: TaskList, input: {}}
    - text: "Done."
    - text: "Noted."
"#,
    );
    let out = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ROO_STORE", &world.url)
        .env("PATH", path_with_bins())
        .current_dir(world.project())
        .args(["-p", "Have the team do it."])
        .args(["--provider", "anthropic", "--base-url"])
        .arg(mock.base_url("anthropic"))
        .args(["--teammate-mode", "in-process"])
        .args(["--permission-mode", "bypassPermissions"])
        .run();
    out.assert_ok();

    let task = world
        .team()
        .expect("the team is in the store")
        .tasks()
        .get(&TaskId::parse("1").unwrap())
        .unwrap();
    assert_eq!(task.owner.as_ref().map(Name::as_str), Some("alice"));
    assert_eq!(task.status, TaskStatus::Completed);
    assert!(
        world.files_of_teams().is_empty(),
        "{:?}",
        world.files_of_teams()
    );
    // Alice's `roo-mail team show`, relayed by the lead's process, read the store.
    let alice_result = mock
        .requests()
        .into_iter()
        .map(|r| r.body.to_string())
        .find(|body| body.contains("You are alice") && body.contains("tool_result"))
        .unwrap_or_default();
    assert!(alice_result.contains("alice@crew"), "{alice_result}");
}

#[test]
fn an_unreachable_store_stops_the_lead_at_start_naming_the_server() {
    let Some(world) = World::new() else { return };
    let out = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .env("ROO_STORE", "postgresql://roo:s3cret@127.0.0.1:1/roo")
        .current_dir(world.project())
        .args([
            "-p",
            "hi",
            "--provider",
            "script",
            "--script",
            "/nonexistent",
        ])
        .run();
    assert_eq!(out.code(), 3, "{}", out.stderr());
    assert!(out.stderr().contains("127.0.0.1:1/roo"), "{}", out.stderr());
    assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
    let out = TestCommand::new(bin("roo-worker"))
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .env("ROO_STORE", "mysql://nope")
        .current_dir(world.project())
        .args(["--team", "crew", "--name", "carol"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
    assert!(out.stderr().contains("ROO_STORE"), "{}", out.stderr());
}

/// A team's local files (transcripts, logs, the lead's key) stay files under the
/// `ROO_HOME` of the host that wrote them, while the team itself is rows. A team deleted
/// from another home (another machine, `roo-mail team delete` there) left them behind,
/// and a new team of the same name created here resumed the old teammate's conversation:
/// on files a team's delete takes its transcripts with it.
#[test]
fn a_team_created_anew_here_does_not_resume_a_transcript_of_one_deleted_elsewhere() {
    let Some(url) = roo_tests::pg::store_url() else {
        return;
    };
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    root.make_dirs(&["home", "here", "there"]);
    root.write("project/a.txt", "a\n");
    roo_tests::git_repo_with_identity(&root.join("project"));
    let run_lead = |answer: &str| {
        let mock = roo_tests::MockLlm::start(&format!(
            r#"
agents:
  "*":
    - when: {{system_contains: "You are alice, a RooCode teammate"}}
      text: "{answer}"
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
        - {{name: Agent, input: {{name: alice, description: "answers", prompt: "Answer."}}}}
    - text: "alice is on it."
    - text: "Noted."
    - text: "Noted."
"#
        ));
        TestCommand::new(bin("roo-lead"))
            .env("ROO_HOME", root.join("here"))
            .env("HOME", root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("ROO_STORE", &url)
            .current_dir(root.join("project"))
            .args(["-p", "Have alice answer."])
            .args(["--provider", "anthropic", "--base-url"])
            .arg(mock.base_url("anthropic"))
            .args(["--teammate-mode", "in-process"])
            .args(["--permission-mode", "bypassPermissions"])
            .run()
            .assert_ok();
        mock.requests()
            .into_iter()
            .map(|r| r.body.to_string())
            .filter(|body| body.contains("You are alice, a RooCode teammate"))
            .collect::<Vec<_>>()
    };
    let first = run_lead("the old team's answer");
    assert!(!first.is_empty(), "alice ran");
    // The team is deleted from another home on the same store.
    TestCommand::new(bin("roo-mail"))
        .env("ROO_HOME", root.join("there"))
        .env("HOME", root.join("home"))
        .env("ROO_STORE", &url)
        .args(["team", "delete", "--team", "crew", "--force"])
        .run()
        .assert_ok();
    let second = run_lead("the new team's answer");
    assert!(!second.is_empty(), "alice ran again");
    for body in &second {
        assert!(
            !body.contains("the old team's answer"),
            "the new alice resumed the old one's conversation: {body}"
        );
    }
}
