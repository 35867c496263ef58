//! Budgets that stop new work (issue 32): a `roo-lead -p` run, its team, a teammate and a
//! task each stopped by their cap, in USD and in requests, against the mock server
//! (Anthropic wire format) reporting each turn's usage as the Messages API does. The
//! model is `claude-sonnet-4-5` ($3 / $15 per million input / output tokens), so a turn
//! reporting 1000 input and 1000 output tokens costs $0.018. Every request the mock
//! received is counted: none may start once its scope's cap is reached.

use std::path::{Path, PathBuf};

use roo_store::{Name, RooHome, TaskId, TaskStatus, Team};
use roo_tests::{MockLlm, TempDir, TestCommand, bin};
use serde_json::Value;

/// Usage of every scripted turn.
const USAGE: &str = "usage: {input_tokens: 1000, output_tokens: 1000}";

struct World {
    root: TempDir,
    /// The PostgreSQL store's URL (`ROO_STORE`), else the file store.
    url: Option<String>,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write("project/a.txt", "The word is quokka.\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        World { root, url: None }
    }

    /// The same on the PostgreSQL test server (`None` without `ROO_TEST_PG_DSN`).
    fn on_pg() -> Option<World> {
        let url = roo_tests::pg::store_url()?;
        Some(World {
            url: Some(url),
            ..World::new()
        })
    }

    /// `roo-task`, `roo-mail` or `roo-lead` on this world's home and store.
    fn cmd(&self, program: &str) -> TestCommand {
        let cmd = TestCommand::new(bin(program)).env("ROO_HOME", self.root.join("roo"));
        match &self.url {
            Some(url) => cmd.env("ROO_STORE", url),
            None => cmd,
        }
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    /// `roo-lead -p` in the project against `mock`, in-process teammates, bypass mode.
    fn lead(&self, mock: &MockLlm) -> TestCommand {
        self.cmd("roo-lead")
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("ANTHROPIC_API_KEY", "test-key")
            .current_dir(self.project())
            .args(["-p", "Work on it."])
            .args(["--provider", "anthropic", "--model", "claude-sonnet-4-5"])
            .arg("--base-url")
            .arg(mock.base_url("anthropic"))
            .args(["--teammate-mode", "in-process"])
            .args(["--permission-mode", "bypassPermissions"])
            .args(["--team-timeout", "60"])
    }

    /// Writes the user's config file.
    fn user_config(&self, yaml: &str) {
        self.root.write("roo/config.yaml", yaml);
    }

    fn team(&self) -> Team {
        self.team_now().expect("team crew")
    }

    /// The team `crew` as the store holds it, if it exists.
    fn team_now(&self) -> Option<Team> {
        let home = RooHome::new(self.root.join("roo"));
        let home = match &self.url {
            Some(url) => home.with_store(roo_store::PgStore::connect(url).ok()?),
            None => home,
        };
        Team::open(&home, Name::parse_as("team", "crew").unwrap()).ok()
    }
}

/// `n` turns of `who` (`None`: any agent, i.e. the lead once teammates' turns are taken
/// by their `when`) that each read a.txt and report [`USAGE`].
fn reading_turns(who: Option<&str>, n: usize) -> String {
    let when = who
        .map(|name| {
            format!("      when: {{system_contains: \"You are {name}, a RooCode teammate\"}}\n")
        })
        .unwrap_or_default();
    let mut out = String::new();
    for _ in 0..n {
        out.push_str(&format!(
            "    - tool_calls: [{{name: ReadFile, input: {{path: a.txt}}}}]\n{when}      {USAGE}\n"
        ));
    }
    out
}

/// The bodies of the requests `who` sent (`None`: the lead's).
fn requests_of(mock: &MockLlm, who: Option<&str>) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|body| {
            let system = body["system"].to_string();
            match who {
                Some(name) => system.contains(&format!("You are {name}, a RooCode teammate")),
                None => !system.contains("a RooCode teammate"),
            }
        })
        .collect()
}

#[test]
fn a_run_over_its_request_cap_starts_no_more_requests_and_exits_5() {
    let world = World::new();
    let mock = MockLlm::start(&format!(
        "agents:\n  \"*\":\n{}    - text: \"done\"\n",
        reading_turns(None, 6)
    ));
    let out = world.lead(&mock).args(["--max-requests", "2"]).run();
    assert_eq!(out.code(), 5, "{}", out.stderr());
    assert_eq!(mock.requests().len(), 2, "no request past the cap");
    let stderr = out.stderr();
    assert!(
        stderr.contains("the session's cap") && stderr.contains("2 requests"),
        "says which cap and what was spent: {stderr}"
    );
}

#[test]
fn a_run_over_its_usd_cap_is_warned_at_80_percent_then_stopped_with_exit_5() {
    let world = World::new();
    let mock = MockLlm::start(&format!(
        "agents:\n  \"*\":\n{}    - text: \"done\"\n",
        reading_turns(None, 6)
    ));
    // 0.04 USD: 2 turns are 90 % (told once), 3 turns reach it.
    let out = world
        .lead(&mock)
        .args(["--max-cost-usd", "0.04", "--output-format", "json"])
        .run();
    assert_eq!(out.code(), 5, "{}", out.stderr());
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "no request past the cap");
    let told = |body: &Value| body["messages"].to_string().matches("% spent").count();
    assert_eq!(told(&requests[1].body), 0);
    assert_eq!(told(&requests[2].body), 1, "the model is told once at 80 %");
    let result = out.json();
    assert_eq!(result["outcome"]["kind"], "over_budget", "{result}");
    let reason = result["outcome"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("0.04 USD") && reason.contains("0.0540 USD in 3 requests"),
        "{reason}"
    );
}

/// The lead creates the team and its task, spawns alice and waits. alice claims the
/// task and keeps reading until a cap stops her.
fn team_script(task_create: &str, agent: &str) -> String {
    team_script_with(task_create, agent, "")
}

/// [`team_script`] with more calls in alice's first turn (after her claim).
fn team_script_with(task_create: &str, agent: &str, first_calls: &str) -> String {
    format!(
        r#"agents:
  "*":
    - when: {{system_contains: "You are alice, a RooCode teammate"}}
      tool_calls: [{{name: TaskUpdate, input: {{id: "1", owner: alice}}}}{first_calls}]
      {USAGE}
{alice}    - when: {{system_contains: "You are alice, a RooCode teammate"}}
      text: "alice: done reading."
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
        - {task_create}
      {USAGE}
    - tool_calls:
        - {agent}
      {USAGE}
    - text: "Waiting for alice."
      {USAGE}
    - text: "alice stopped; I stop too."
      {USAGE}
    - text: "Noted."
      {USAGE}
    - text: "Noted."
      {USAGE}
"#,
        alice = reading_turns(Some("alice"), 8),
    )
}

const PLAIN_TASK: &str = r#"{name: TaskCreate, input: {subject: "Read a.txt"}}"#;
const SPAWN_ALICE: &str =
    r#"{name: Agent, input: {name: alice, prompt: "Claim task 1 and read a.txt until told."}}"#;

/// The task alice worked on went back to pending with a note naming the cap.
fn assert_released_with_note(world: &World, cap: &str) {
    let task = world
        .team()
        .tasks()
        .get(&TaskId::parse("1").unwrap())
        .unwrap();
    assert_eq!(task.status, TaskStatus::Pending, "{task:#?}");
    assert_eq!(task.owner, None, "{task:#?}");
    let note = task
        .notes
        .last()
        .map(|n| n.text.clone())
        .unwrap_or_default();
    assert!(note.contains(cap), "{note}");
}

/// The lead was told by alice why she stopped.
fn assert_lead_told(world: &World, cap: &str) {
    let inbox = world
        .team()
        .mailbox()
        .read(
            &Name::parse("lead").unwrap(),
            &roo_store::ReadFilter {
                include_archived: true,
                ..roo_store::ReadFilter::default()
            },
        )
        .unwrap();
    assert!(
        inbox
            .iter()
            .any(|m| m.from.as_str() == "alice" && m.text.contains(cap)),
        "{inbox:#?}"
    );
}

#[test]
fn a_team_over_its_usd_cap_stops_its_teammate_and_its_lead_with_exit_5() {
    team_over_its_usd_cap(World::new());
}

#[test]
fn a_team_over_its_usd_cap_is_stopped_on_the_postgresql_store_too() {
    let Some(world) = World::on_pg() else {
        eprintln!("skipped: ROO_TEST_PG_DSN is not set");
        return;
    };
    team_over_its_usd_cap(world);
}

fn team_over_its_usd_cap(world: World) {
    // The lead's three requests (the last one ends its turn) are 0.054 USD; alice's claim
    // and two reads bring the team to 0.108 USD, past 0.1: she stops, and so does the
    // lead, whose turn on her report starts no request.
    world.user_config("budget:\n  team_usd: 0.1\n");
    // alice's first turn waits (bounded) until the lead's turn is accounted, so the
    // order of the team's requests is the same on every run.
    let go = world.root.join("go");
    let wait = format!(
        ", {{name: Bash, input: {{command: \"i=0; while [ ! -e '{}' ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done\"}}}}",
        go.display()
    );
    let mock = MockLlm::start(&team_script_with(PLAIN_TASK, SPAWN_ALICE, &wait));
    let lead = world.lead(&mock).spawn();
    let lead_name = Name::parse("lead").unwrap();
    roo_tests::wait_until(
        "the lead's three requests accounted in the team",
        std::time::Duration::from_secs(60),
        || {
            let spend = world.team_now()?.tasks().spend().ok()?.0;
            (spend.get(&lead_name)?.requests == 3).then_some(())
        },
        || format!("{} requests so far", mock.requests().len()),
    );
    std::fs::write(&go, "").unwrap();
    let out = lead.wait();
    assert_eq!(out.code(), 5, "{}", out.stderr());
    assert_eq!(
        requests_of(&mock, Some("alice")).len(),
        3,
        "alice: none past the cap"
    );
    assert_eq!(
        requests_of(&mock, None).len(),
        3,
        "the lead: none past the cap"
    );
    assert!(
        out.stderr().contains("the team's cap of 0.1 USD"),
        "{}",
        out.stderr()
    );
    assert_released_with_note(&world, "the team's cap");
    assert_lead_told(&world, "the team's cap");
    // Claims are refused while the team is over its cap.
    let claim = world
        .cmd("roo-task")
        .args(["claim", "1", "--team", "crew", "--as", "alice"])
        .run();
    assert_ne!(claim.code(), 0, "{}", claim.stdout());
    assert!(claim.stderr().contains("budget"), "{}", claim.stderr());
}

#[test]
fn a_teammate_over_its_request_cap_releases_its_task_and_the_lead_goes_on() {
    let world = World::new();
    let spawn = r#"{name: Agent, input: {name: alice, budget: {requests: 3}, prompt: "Claim task 1 and read a.txt until told."}}"#;
    let mock = MockLlm::start(&team_script(PLAIN_TASK, spawn));
    let out = world.lead(&mock).run();
    out.assert_ok();
    assert_eq!(
        requests_of(&mock, Some("alice")).len(),
        3,
        "alice: none past her cap"
    );
    assert_released_with_note(&world, "alice's cap of 3 requests");
    assert_lead_told(&world, "alice's cap");
    // Her spend and cap, per member.
    let members = world
        .cmd("roo-mail")
        .args(["list", "--team", "crew", "--json"])
        .run()
        .json();
    let alice = members
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "alice")
        .unwrap_or_else(|| panic!("{members}"));
    assert_eq!(alice["spend"]["requests"], 3, "{members}");
    assert_eq!(alice["budget"]["requests"], 3, "{members}");
    let cost = alice["spend"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 3.0 * 0.018).abs() < 1e-9, "{members}");
}

/// A teammate under a cap in requests whose run ends by itself: the request reserved with
/// its last response is given back when the run ends, so nothing stays reserved.
#[test]
fn a_teammate_whose_run_ends_under_a_request_cap_leaves_nothing_reserved() {
    let world = World::new();
    let spawn = r#"{name: Agent, input: {name: alice, budget: {requests: 50}, prompt: "Claim task 1 and read a.txt until told."}}"#;
    let mock = MockLlm::start(&team_script(PLAIN_TASK, spawn));
    let out = world.lead(&mock).run();
    out.assert_ok();
    let alice = roo_store::Name::parse("alice").unwrap();
    let tasks = world.team().tasks();
    let (spend, _) = tasks.spend().unwrap();
    let state = tasks.spend_state(&alice, None).unwrap();
    assert_eq!(spend[&alice].requests, 10, "{spend:?}");
    assert_eq!(
        state.member.requests, 10,
        "a request left reserved: {state:?}"
    );
}

#[test]
fn a_task_over_its_usd_cap_is_released_and_its_teammate_starts_no_more_requests_for_it() {
    let world = World::new();
    // alice's claim request is charged to the task once she holds it; three requests
    // (0.054 USD) reach its 0.05 USD.
    let task = r#"{name: TaskCreate, input: {subject: "Read a.txt", budget_usd: 0.05}}"#;
    let mock = MockLlm::start(&team_script(task, SPAWN_ALICE));
    let out = world.lead(&mock).run();
    out.assert_ok();
    assert_eq!(
        requests_of(&mock, Some("alice")).len(),
        3,
        "alice: none past the task's cap"
    );
    assert_released_with_note(&world, "task #1's cap of 0.05 USD");
    assert_lead_told(&world, "task #1's cap");
    let json = world
        .cmd("roo-task")
        .args(["get", "1", "--team", "crew", "--json"])
        .run()
        .json();
    assert_eq!(json["budget"]["usd"], 0.05, "{json}");
    assert_eq!(json["usage"]["alice"]["requests"], 3, "{json}");
}

/// A lead that starts the `scout` sub-agent (a user definition with `budget:`), whose
/// turns keep reading; then the lead answers.
fn scout_world(requests: u64) -> (World, MockLlm) {
    let world = World::new();
    world.root.write(
        "roo/agents/scout.md",
        format!(
            "---\nname: scout\ndescription: Reads files.\nbudget:\n  requests: {requests}\n---\nYou are the scout of this test.\n"
        ),
    );
    let mut scout = String::new();
    for _ in 0..5 {
        scout.push_str(&format!(
            "    - when: {{system_contains: \"You are the scout of this test\"}}\n      tool_calls: [{{name: ReadFile, input: {{path: a.txt}}}}]\n      {USAGE}\n"
        ));
    }
    let mock = MockLlm::start(&format!(
        r#"agents:
  "*":
{scout}    - tool_calls:
        - {{name: Agent, input: {{subagent_type: scout, description: "read", prompt: "Read a.txt until told."}}}}
      {USAGE}
    - text: "The scout stopped."
      {USAGE}
"#
    ));
    (world, mock)
}

fn scout_requests(mock: &MockLlm) -> usize {
    mock.requests()
        .iter()
        .filter(|r| {
            r.body["system"]
                .to_string()
                .contains("You are the scout of this test")
        })
        .count()
}

#[test]
fn a_sub_agent_stops_at_its_definitions_cap_and_counts_toward_its_parent() {
    // Its own cap: two requests, then the lead goes on.
    let (world, mock) = scout_world(2);
    let out = world.lead(&mock).run();
    out.assert_ok();
    assert_eq!(scout_requests(&mock), 2, "none past the definition's cap");
    assert_eq!(mock.requests().len(), 4);

    // Its parent's cap: the lead's request and the scout's two reach --max-requests 3;
    // neither starts another, and the run exits 5.
    let (world, mock) = scout_world(10);
    let out = world.lead(&mock).args(["--max-requests", "3"]).run();
    assert_eq!(out.code(), 5, "{}", out.stderr());
    assert_eq!(scout_requests(&mock), 2);
    assert_eq!(
        mock.requests().len(),
        3,
        "no request past the session's cap"
    );
}

/// A `budget:` amount past what the task list holds (here a team cap of 2e9 USD, over the
/// store's 1e9) must not make the lead's write of the caps fail as a whole: before, the
/// refused write was only logged, and the task cap beside it was never in force.
#[test]
fn a_huge_team_cap_in_the_config_leaves_the_other_caps_in_force() {
    let world = World::new();
    world.user_config("budget:\n  team_usd: 2000000000\n  task_usd: 0.05\n");
    let task = r#"{name: TaskCreate, input: {subject: "Read a.txt"}}"#;
    let mock = MockLlm::start(&team_script(task, SPAWN_ALICE));
    let out = world.lead(&mock).run();
    out.assert_ok();
    assert_eq!(
        requests_of(&mock, Some("alice")).len(),
        3,
        "alice: none past the task's cap"
    );
    assert_released_with_note(&world, "task #1's cap of 0.05 USD");
}

/// The Bash call that holds alice's first turn (bounded) until the test creates the
/// returned file: the order of the team's requests is then the same on every run.
fn hold_alice(world: &World) -> (String, PathBuf) {
    let go = world.root.join("go");
    let wait = format!(
        ", {{name: Bash, input: {{command: \"i=0; while [ ! -e '{}' ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done\"}}}}",
        go.display()
    );
    (wait, go)
}

/// Waits until alice holds task 1.
fn wait_for_alice_on_task_1(world: &World, mock: &MockLlm) {
    roo_tests::wait_until(
        "alice holds task 1",
        std::time::Duration::from_secs(60),
        || {
            let task = world
                .team_now()?
                .tasks()
                .get(&TaskId::parse("1").ok()?)
                .ok()?;
            (task.owner.as_ref().map(Name::as_str) == Some("alice")).then_some(())
        },
        || format!("{} requests so far", mock.requests().len()),
    );
}

/// Waits until the lead's first `n` requests are accounted in the team.
fn wait_for_leads_requests(world: &World, mock: &MockLlm, n: u64) {
    let lead_name = Name::parse("lead").unwrap();
    roo_tests::wait_until(
        "the lead's requests accounted in the team",
        std::time::Duration::from_secs(60),
        || {
            let spend = world.team_now()?.tasks().spend().ok()?.0;
            (spend.get(&lead_name)?.requests == n).then_some(())
        },
        || format!("{} requests so far", mock.requests().len()),
    );
}

/// A claim of task 1 by alice, which must be refused for a budget, saying `why`.
fn assert_claim_refused(world: &World, args: &[&str], why: &str) {
    let claim = world
        .cmd("roo-task")
        .arg("claim")
        .args(args)
        .args(["--team", "crew", "--as", "alice"])
        .run();
    assert_ne!(claim.code(), 0, "{}", claim.stdout());
    assert!(claim.stderr().contains(why), "{}", claim.stderr());
}

#[test]
fn a_team_over_its_request_cap_stops_its_teammate_and_its_lead_with_exit_5() {
    // --max-requests covers the lead's team: the lead's three requests and alice's claim
    // and one read are 5; her next request and the lead's on her notice do not start.
    let world = World::new();
    let (wait, go) = hold_alice(&world);
    let mock = MockLlm::start(&team_script_with(PLAIN_TASK, SPAWN_ALICE, &wait));
    let lead = world.lead(&mock).args(["--max-requests", "5"]).spawn();
    wait_for_leads_requests(&world, &mock, 3);
    std::fs::write(&go, "").unwrap();
    let out = lead.wait();
    assert_eq!(out.code(), 5, "{}", out.stderr());
    assert_eq!(mock.requests().len(), 5, "no request past the cap");
    assert_eq!(requests_of(&mock, Some("alice")).len(), 2);
    assert!(
        out.stderr().contains("of 5 requests was reached"),
        "{}",
        out.stderr()
    );
    // alice's 80 % notice wakes the lead, whose request is refused at once: the run may
    // end before alice reports, so only the refusals are certain here.
    assert_claim_refused(&world, &["1"], "the team reached its budget of 5 requests");
}

#[test]
fn a_teammate_over_its_usd_cap_releases_its_task_and_claims_no_more() {
    // `teammate_usd` in the config: alice's three requests (0.054 USD) reach 0.05 USD.
    let world = World::new();
    world.user_config("budget:\n  teammate_usd: 0.05\n");
    let mock = MockLlm::start(&team_script(PLAIN_TASK, SPAWN_ALICE));
    let out = world.lead(&mock).run();
    out.assert_ok();
    assert_eq!(
        requests_of(&mock, Some("alice")).len(),
        3,
        "alice: none past her cap"
    );
    assert_released_with_note(&world, "alice's cap of 0.05 USD");
    assert_lead_told(&world, "alice's cap of 0.05 USD");
    // Neither the task by name nor the next ready one is hers to claim any more.
    assert_claim_refused(&world, &["1"], "alice reached its budget of 0.05 USD");
    assert_claim_refused(&world, &["--next"], "alice reached its budget of 0.05 USD");
}

#[test]
fn a_task_over_its_request_cap_is_released_and_not_claimed_again() {
    // The claiming request is charged to the task with the next one: two requests.
    let world = World::new();
    let task = r#"{name: TaskCreate, input: {subject: "Read a.txt", budget_requests: 2}}"#;
    let mock = MockLlm::start(&team_script(task, SPAWN_ALICE));
    let out = world.lead(&mock).run();
    out.assert_ok();
    assert_eq!(
        requests_of(&mock, Some("alice")).len(),
        2,
        "alice: none past the task's cap"
    );
    assert_released_with_note(&world, "task #1's cap of 2 requests");
    assert_lead_told(&world, "task #1's cap of 2 requests");
    let json = world
        .cmd("roo-task")
        .args(["get", "1", "--team", "crew", "--json"])
        .run()
        .json();
    assert_eq!(json["budget"]["requests"], 2, "{json}");
    assert_eq!(json["usage"]["alice"]["requests"], 2, "{json}");
    assert_claim_refused(&world, &["1"], "the task reached its budget of 2 requests");
}

/// A task's own cap only lowers the config's `task_usd`: a task created with 1 USD
/// stops at the config's 0.05 USD all the same (before, its own cap replaced it).
#[test]
fn a_tasks_own_cap_cannot_raise_the_configs_task_cap() {
    let world = World::new();
    world.user_config("budget:\n  task_usd: 0.05\n");
    let task = r#"{name: TaskCreate, input: {subject: "Read a.txt", budget_usd: 1.0}}"#;
    let mock = MockLlm::start(&team_script(task, SPAWN_ALICE));
    let out = world.lead(&mock).run();
    out.assert_ok();
    assert_eq!(
        requests_of(&mock, Some("alice")).len(),
        3,
        "alice: none past the config's task cap"
    );
    assert_released_with_note(&world, "task #1's cap of 0.05 USD");
}

/// While alice holds task 1, her team's task list is replaced by `list`; then the gate
/// must fail closed: alice starts no request and tells the lead `told`; the lead's next
/// request does not start either and the run exits 5.
fn replaced_list_stops_the_team(list: &str, told: &str) {
    let world = World::new();
    let (wait, go) = hold_alice(&world);
    let mock = MockLlm::start(&team_script_with(PLAIN_TASK, SPAWN_ALICE, &wait));
    let lead = world.lead(&mock).spawn();
    wait_for_leads_requests(&world, &mock, 3);
    wait_for_alice_on_task_1(&world, &mock);
    std::fs::write(world.team().tasks().path(), list).unwrap();
    std::fs::write(&go, "").unwrap();
    let out = lead.wait();
    assert_eq!(out.code(), 5, "{}", out.stderr());
    assert_eq!(requests_of(&mock, Some("alice")).len(), 1, "alice: none");
    assert_eq!(requests_of(&mock, None).len(), 3, "the lead: none");
    assert!(out.stderr().contains(told), "{}", out.stderr());
    assert_lead_told(&world, told);
}

/// The team's spend cannot be read (its task list was written by a newer program): the
/// gate fails closed.
#[test]
fn a_team_whose_spend_cannot_be_read_starts_no_request() {
    replaced_list_stops_the_team(
        r#"{"version":"99.0","next_id":1,"tasks":[]}"#,
        "the team's spend could not be read",
    );
}

/// Review of issue 32: a task list reset (a damaged one moved aside, a new empty one in
/// its place) lost every cap and the spend with it, and the gates went on as if nothing
/// had been spent. A gate that sees the team's recorded spend go down fails closed.
#[test]
fn a_task_list_reset_under_a_running_team_lifts_no_cap() {
    replaced_list_stops_the_team(
        r#"{"version":"1.0","next_id":2,"tasks":[]}"#,
        "the task list was reset or replaced",
    );
}

/// Review of issue 32: one store error that passes (here the task list's row held by
/// another session past the 10 s lock wait) stopped the gate for the rest of the session.
/// Now the gate tries again for 30 s: alice goes on once the row is free, and the run
/// ends 0.
#[test]
fn a_task_list_held_for_a_while_pauses_the_gate_and_does_not_stop_it() {
    let Some(world) = World::on_pg() else {
        eprintln!("skipped: ROO_TEST_PG_DSN is not set");
        return;
    };
    let url = world.url.clone().unwrap();
    let (wait, go) = hold_alice(&world);
    let mock = MockLlm::start(&team_script_with(PLAIN_TASK, SPAWN_ALICE, &wait));
    let lead = world.lead(&mock).spawn();
    wait_for_leads_requests(&world, &mock, 3);
    wait_for_alice_on_task_1(&world, &mock);
    let holder = std::process::Command::new("psql")
        .args([url.as_str(), "-v", "ON_ERROR_STOP=1", "-c"])
        .arg(
            "BEGIN; SELECT 1 FROM roo_doc WHERE key = 'tasks/crew/tasks.json' FOR UPDATE; \
             SELECT pg_sleep(13); COMMIT",
        )
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(&go, "").unwrap();
    let out = lead.wait();
    let held = holder.wait_with_output().unwrap();
    assert!(held.status.success(), "the row was not held");
    assert_eq!(out.code(), 0, "{}", out.stderr());
    assert!(
        requests_of(&mock, Some("alice")).len() >= 2,
        "alice went on after the row was free"
    );
}

/// Three teammates reading at once, each response taking 300 ms: a team's request cap
/// (the lead's --max-requests) lets exactly as many requests start as it allows. Before,
/// each teammate checked the spend and counted its request only after the response, so
/// all three started one more at the cap.
fn concurrent_teammates_stop_at_the_request_cap(world: World) {
    let slow = |name: &str| {
        let mut out = String::new();
        for _ in 0..8 {
            out.push_str(&format!(
                "    - tool_calls: [{{name: ReadFile, input: {{path: a.txt}}}}]\n      when: {{system_contains: \"You are {name}, a RooCode teammate\"}}\n      delay_ms: 300\n      {USAGE}\n"
            ));
        }
        out
    };
    let spawn = |name: &str| {
        format!(
            "        - {{name: Agent, input: {{name: {name}, prompt: \"Read a.txt until told.\"}}}}\n"
        )
    };
    let mock = MockLlm::start(&format!(
        "agents:\n  \"*\":\n{}{}{}    - tool_calls:\n        - {{name: TeamCreate, input: {{team_name: crew}}}}\n      {USAGE}\n    - tool_calls:\n{}{}{}      {USAGE}\n    - text: \"Waiting.\"\n      {USAGE}\n{noted}",
        slow("alice"),
        slow("bob"),
        slow("carol"),
        spawn("alice"),
        spawn("bob"),
        spawn("carol"),
        noted = format!("    - text: \"Noted.\"\n      {USAGE}\n").repeat(8),
    ));
    // The lead's three requests leave 7 for the three teammates.
    let out = world.lead(&mock).args(["--max-requests", "10"]).run();
    assert_eq!(out.code(), 5, "{}", out.stderr());
    let started = mock.requests().len();
    assert!(started <= 10, "{started} requests started on a cap of 10");
    let (spend, _) = world.team().tasks().spend().unwrap();
    let counted = roo_store::budget::team_total(&spend).requests;
    assert_eq!(
        counted, 10,
        "the team counted {counted} requests: {spend:?}"
    );
    // No reservation is left behind: every run gave back what it did not use.
    let lead = roo_store::Name::parse("lead").unwrap();
    let state = world.team().tasks().spend_state(&lead, None).unwrap();
    assert_eq!(state.team.requests, 10, "requests left reserved: {state:?}");
    for name in ["alice", "bob", "carol"] {
        assert!(
            !requests_of(&mock, Some(name)).is_empty(),
            "{name} started no request"
        );
    }
}

#[test]
fn concurrent_teammates_never_start_more_requests_than_the_teams_cap() {
    concurrent_teammates_stop_at_the_request_cap(World::new());
}

#[test]
fn concurrent_teammates_stop_at_the_teams_request_cap_on_the_postgresql_store_too() {
    let Some(world) = World::on_pg() else {
        eprintln!("skipped: ROO_TEST_PG_DSN is not set");
        return;
    };
    concurrent_teammates_stop_at_the_request_cap(world);
}
