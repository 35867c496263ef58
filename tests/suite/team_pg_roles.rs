//! Member roles given to pane teammates (issue 33, docs/DISTRIBUTED.md "Authority in
//! the database"): a `roo-worker` in a tmux pane on the PostgreSQL store logs in as the
//! member role the lead made for it — the server says so — holds none of the lead's
//! password, does its task, and its role is gone once the team is deleted; a login that
//! may not create roles refuses a spawn under `member_roles: required` (leaving nothing)
//! and hands over its own login under `auto`, saying so; and so does a server whose
//! `pg_hba.conf` admits the lead's login but refuses the member role's (the lead tries
//! the member's login before handing it over).
//!
//! Skipped without `ROO_TEST_PG_DSN` (`scripts/test` starts a throwaway server).

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_tests::pg::psql;
use roo_tests::{TempDir, Tmux, bin, path_with_bins, wait_until};

use super::team_panes::workers_under;

/// A password the lead holds (in its URL and in `PGPASSWORD`): no worker may see it.
const URL_PASSWORD: &str = "urlpw-canary-3f9d27";
const ENV_PASSWORD: &str = "envpw-canary-81c4e0";

struct World {
    root: TempDir,
    /// The lead's store URL.
    url: String,
    team: String,
}

impl World {
    /// A project repository and homes; the store at `url` (`None`: skipped).
    fn new(url: String, team: &str, config: &str) -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write("roo/config.yaml", config);
        root.write("project/a.txt", "a\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        World {
            root,
            url,
            team: team.to_owned(),
        }
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    /// Runs `roo-lead -p` with `script` in a tmux pane (tmux backend), `PGPASSWORD` set
    /// to [`ENV_PASSWORD`]; returns the server (the lead's exit code lands in
    /// `lead.code`).
    fn start_lead(&self, script: &str) -> Tmux {
        let script = self.root.write("script.yaml", script);
        self.root.write("store-url", &self.url);
        let run = self.root.write(
            "run-lead.sh",
            format!(
                "PATH='{path}'\nexport PATH\n\
                 ROO_STORE=\"$(cat '{url}')\"\nexport ROO_STORE\n\
                 PGPASSWORD={ENV_PASSWORD}\nexport PGPASSWORD\n\
                 '{lead}' -p 'Have alice do it.' \
                 --provider script --script '{script}' --permission-mode bypassPermissions \
                 --output-format stream-json --teammate-mode tmux --team-timeout 120 \
                 > '{out}' 2> '{err}'\necho $? > '{code}.part' && mv '{code}.part' '{code}'\n",
                path = path_with_bins(),
                url = self.root.join("store-url").display(),
                lead = bin("roo-lead").display(),
                script = script.display(),
                out = self.root.join("lead.out").display(),
                err = self.root.join("lead.err").display(),
                code = self.root.join("lead.code").display(),
            ),
        );
        let env = [
            ("ROO_HOME", self.root.join("roo").display().to_string()),
            ("HOME", self.root.join("home").display().to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
        ];
        Tmux::start(&self.project(), &env, &format!("sh '{}'", run.display()))
    }

    fn wait_for_exit(&self, tmux: &Tmux) -> i32 {
        wait_until(
            "the lead to exit",
            Duration::from_secs(120),
            || {
                std::fs::read_to_string(self.root.join("lead.code"))
                    .ok()?
                    .trim()
                    .parse::<i32>()
                    .ok()
            },
            || format!("{}\n{}", tmux.all_screens(), self.output()),
        )
    }

    fn output(&self) -> String {
        let logs: String =
            std::fs::read_dir(self.root.join(format!("roo/teams/{}/logs", self.team)))
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

    /// Roles of this test's team (roles are the cluster's, across schemas).
    fn roles(&self) -> String {
        psql(
            &self.url,
            &format!(
                "SELECT string_agg(rolname, ',') FROM pg_roles WHERE rolname LIKE 'roo\\_m\\_{}\\_%'",
                self.team
            ),
        )
    }
}

/// The lead makes the team and a task, spawns alice in a pane, waits for her report,
/// then (once she is idle) deletes the team.
fn script(team: &str, alice_command: &str) -> String {
    format!(
        r#"
agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: {team}, description: "roles"}}}}
        - {{name: TaskCreate, input: {{subject: "Write c.txt"}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, description: "writes c", prompt: "Claim task 1, commit c.txt, complete it."}}}}
    - text: "Waiting for alice."
    - when: {{last_user_contains: "alice done"}}
      tool_calls:
        - {{name: Bash, input: {{command: "until [ \"$(roo-mail team show | grep -c '@{team}  busy')\" = 1 ]; do sleep 0.05; done; echo settled"}}}}
        - {{name: TeamDelete, input: {{}}}}
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
  alice:
    - tool_calls:
        - {{name: TaskUpdate, input: {{id: "1", owner: alice}}}}
        - {{name: Bash, input: {{command: "{alice_command}echo c > c.txt && git add c.txt && git commit -qm 'alice: c.txt'"}}}}
        - {{name: TaskUpdate, input: {{id: "1", status: completed}}}}
        - {{name: SendMessage, input: {{to: lead, summary: "alice done", message: "alice done: c.txt is committed"}}}}
    - text: "Task 1 done."
    - text: "Done."
"#
    )
}

/// `url` with `password` in its authority (after the user).
fn with_password(url: &str, password: &str) -> String {
    let start = url.find("://").unwrap() + 3;
    let at = start + url[start..].find('@').unwrap();
    format!("{}:{password}{}", &url[..at], &url[at..])
}

/// A live `roo-worker`'s pid under `root`.
fn worker_pid(root: &Path) -> Option<u32> {
    workers_under(root)
        .first()
        .and_then(|line| line.split(':').next()?.parse().ok())
}

#[test]
fn a_pane_teammate_logs_in_as_its_member_role_and_the_role_goes_with_the_team() {
    let Some(url) = roo_tests::pg::store_url() else {
        return;
    };
    let team = format!("rc{}", std::process::id());
    let world = World::new(with_password(&url, URL_PASSWORD), &team, "{}\n");
    let release = std::env::temp_dir().join(format!(
        "roo-roles-release-{}-{}",
        std::process::id(),
        world.root.path().file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&release);
    // Alice's command waits for the test to have looked at her process and sessions.
    let wait = format!("until [ -e {} ]; do sleep 0.05; done; ", release.display());
    let tmux = world.start_lead(&script(&team, &wait));

    // While alice works, the server says who her sessions are.
    let role = wait_until(
        "alice's sessions logged in as her member role",
        Duration::from_secs(60),
        || {
            let role = psql(
                &world.url,
                &format!(
                    "SELECT usename FROM pg_stat_activity \
                     WHERE usename LIKE 'roo\\_m\\_{team}\\_alice\\_%' LIMIT 1"
                ),
            );
            (!role.is_empty()).then_some(role)
        },
        || format!("{}\n{}", tmux.all_screens(), world.output()),
    );
    // The role the lead made for her, and the only one of her team.
    assert_eq!(
        psql(
            &world.url,
            &format!("SELECT role FROM roo_member_role WHERE team = '{team}'"),
        ),
        role
    );
    assert_eq!(world.roles(), role);
    // Her process holds none of the lead's password (in its URL, in its PGPASSWORD).
    let pid = worker_pid(world.root.path()).expect("alice's roo-worker runs");
    for file in ["environ", "cmdline"] {
        let bytes = std::fs::read(format!("/proc/{pid}/{file}")).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for secret in [URL_PASSWORD, ENV_PASSWORD] {
            assert!(!text.contains(secret), "{secret} in the worker's {file}");
        }
    }
    std::fs::write(&release, "").unwrap();

    let code = world.wait_for_exit(&tmux);
    let _ = std::fs::remove_file(&release);
    assert_eq!(code, 0, "{}", world.output());
    let out = std::fs::read_to_string(world.root.join("lead.out")).unwrap();
    assert!(out.contains("alice done"), "{}", world.output());
    assert!(
        !out.contains("member roles: not here"),
        "{}",
        world.output()
    );
    // TeamDelete dropped her role.
    assert_eq!(world.roles(), "", "{}", world.output());
    assert_eq!(workers_under(world.root.path()), Vec::<String>::new());
}

#[test]
fn a_login_that_may_not_create_roles_refuses_required_and_hands_itself_over_under_auto() {
    let Some(dsn) = roo_tests::pg::test_dsn() else {
        return;
    };
    // A second, plain login of the test server (no CREATEROLE) with a schema of its own.
    let plain = format!("roo_plain_{}_{}", std::process::id(), rand_suffix());
    psql(&dsn, &format!("CREATE ROLE {plain} LOGIN"));
    psql(
        &dsn,
        &format!("CREATE SCHEMA {plain} AUTHORIZATION {plain}"),
    );
    let start = dsn.find("://").unwrap() + 3;
    let at = start + dsn[start..].find('@').unwrap();
    let sep = if dsn.contains('?') { '&' } else { '?' };
    let url = format!(
        "{}{plain}{}{sep}options=-c%20search_path%3D{plain}",
        &dsn[..start],
        &dsn[at..]
    );
    let why = "member roles: not here: the store's login may not create roles";

    // `required`: the spawn fails with the sentence and leaves nothing.
    let team = format!("rq{}", std::process::id());
    let world = World::new(url.clone(), &team, "member_roles: required\n");
    let tmux = world.start_lead(&script(&team, ""));
    let _ = world.wait_for_exit(&tmux);
    let out = std::fs::read_to_string(world.root.join("lead.out")).unwrap_or_default();
    assert!(
        out.contains(why) && out.contains("member_roles: required"),
        "{}",
        world.output()
    );
    assert!(!out.contains("alice done"), "{}", world.output());
    assert_eq!(workers_under(world.root.path()), Vec::<String>::new());
    assert!(
        !world
            .project()
            .join(format!(".roocode/worktrees/{team}+alice"))
            .exists(),
        "a clone was made"
    );
    let branches = roo_tests::git(&world.project(), &["branch", "--list", "roo/*"]);
    assert_eq!(branches.trim(), "", "a branch was made");
    assert_eq!(world.roles(), "");
    drop(tmux);

    // `auto` (the default): alice uses the lead's login, and the spawn says so.
    let team = format!("ra{}", std::process::id());
    let world = World::new(url, &team, "{}\n");
    let tmux = world.start_lead(&script(&team, ""));
    let code = world.wait_for_exit(&tmux);
    assert_eq!(code, 0, "{}", world.output());
    let out = std::fs::read_to_string(world.root.join("lead.out")).unwrap();
    assert!(
        out.contains(why) && out.contains("teammate alice uses the lead's login"),
        "{}",
        world.output()
    );
    assert!(out.contains("alice done"), "{}", world.output());
    assert_eq!(world.roles(), "");
    drop(tmux);
    psql(&dsn, &format!("DROP SCHEMA {plain} CASCADE"));
    psql(&dsn, &format!("DROP ROLE {plain}"));
}

#[test]
fn a_server_refusing_the_member_roles_login_refuses_required_and_hands_the_leads_over_under_auto() {
    // A cluster of the test's own: its authentication changes.
    let Some(cluster) = roo_tests::pg::OwnCluster::start() else {
        return;
    };
    // The lead's login (the superuser) is let in; every other login is refused.
    std::fs::write(
        cluster.socket_dir().join("data/pg_hba.conf"),
        format!(
            "local all {} trust\nlocal all all reject\n",
            cluster.superuser
        ),
    )
    .unwrap();
    psql(&cluster.dsn, "CREATE ROLE roo_probe LOGIN");
    psql(&cluster.dsn, "SELECT pg_reload_conf()");
    let at = cluster.dsn.find('@').unwrap();
    let probe = format!("postgresql://roo_probe{}", &cluster.dsn[at..]);
    wait_until(
        "the server to refuse other logins",
        Duration::from_secs(10),
        || {
            let out = std::process::Command::new("psql")
                .args(["-w", &probe, "-Atc", "SELECT 1"])
                .output()
                .unwrap();
            (!out.status.success()).then_some(())
        },
        String::new,
    );
    let why = "member roles: not here: the server refused the member role's login (";

    // `required`: the spawn fails with the sentence and leaves nothing.
    let team = format!("hq{}", std::process::id());
    let world = World::new(
        roo_tests::pg::fresh_schema_url(&cluster.dsn),
        &team,
        "member_roles: required\n",
    );
    let tmux = world.start_lead(&script(&team, ""));
    let _ = world.wait_for_exit(&tmux);
    let out = std::fs::read_to_string(world.root.join("lead.out")).unwrap_or_default();
    assert!(
        out.contains(why) && out.contains("pg_hba.conf") && out.contains("member_roles: required"),
        "{}",
        world.output()
    );
    assert!(!out.contains("alice done"), "{}", world.output());
    assert_eq!(workers_under(world.root.path()), Vec::<String>::new());
    assert!(
        !world
            .project()
            .join(format!(".roocode/worktrees/{team}+alice"))
            .exists(),
        "a clone was made"
    );
    let branches = roo_tests::git(&world.project(), &["branch", "--list", "roo/*"]);
    assert_eq!(branches.trim(), "", "a branch was made");
    assert_eq!(world.roles(), "", "{}", world.output());
    drop(tmux);

    // `auto` (the default): alice uses the lead's login, and the spawn says so.
    let team = format!("ha{}", std::process::id());
    let world = World::new(roo_tests::pg::fresh_schema_url(&cluster.dsn), &team, "{}\n");
    let tmux = world.start_lead(&script(&team, ""));
    let code = world.wait_for_exit(&tmux);
    assert_eq!(code, 0, "{}", world.output());
    let out = std::fs::read_to_string(world.root.join("lead.out")).unwrap();
    assert!(
        out.contains(why) && out.contains("teammate alice uses the lead's login"),
        "{}",
        world.output()
    );
    assert!(out.contains("alice done"), "{}", world.output());
    assert_eq!(world.roles(), "", "{}", world.output());
    drop(tmux);
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        % 1_000_000
}
