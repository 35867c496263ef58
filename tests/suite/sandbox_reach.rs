//! What a command must not reach although no list names it: sockets anywhere in the
//! home (Docker Desktop's, the 1Password agent's, a `tmux -S` server's), a database
//! server's own socket directory, a lead that claims a team, and credentials in the
//! environment under any name. Through the real `roo-lead -p` with a scripted model;
//! every target lives under Cargo's target tmp dir (outside the temp dirs the sandbox
//! leaves writable) and is judged by the server side, not by the command's output.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use roo_tests::{TempDir, TestCommand, bin};
use serde_json::Value;

const PYTHON: &str = "/usr/bin/python3";

/// Connects to the UNIX socket given as the argument and says so.
const CONNECT: &str = "import socket,sys\n\
s=socket.socket(socket.AF_UNIX)\n\
s.connect(sys.argv[1])\n\
print('connected')\n";

struct World {
    root: TempDir,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        root.write("project/README.md", "# demo\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        for dir in ["home", "roo"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        World { root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn cli(&self, name: &str) -> TestCommand {
        TestCommand::new(bin(name))
            .env("ROO_HOME", self.path("roo"))
            .env("HOME", self.path("home"))
            .current_dir(self.path("project"))
    }

    /// `roo-lead -p` whose scripted model runs `commands`, one Bash call each.
    fn lead(&self, commands: &[String]) -> TestCommand {
        let mut script = String::from("agents:\n  \"*\":\n");
        for command in commands {
            let input = serde_json::json!({"command": command});
            script.push_str(&format!(
                "    - tool_calls:\n        - {{name: Bash, input: {input}}}\n"
            ));
        }
        script.push_str("    - text: \"Done.\"\n");
        let script = self.root.write("script.yaml", script);
        let bins = bin("roo-lead").parent().unwrap().to_path_buf();
        self.cli("roo-lead")
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bins.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .args(["-p", "go", "--provider", "script", "--script"])
            .arg(script)
            .args(["--permission-mode", "bypassPermissions"])
    }

    /// A UNIX socket server at `rel` (under the world), accepting nothing until asked.
    fn listen(&self, rel: &str) -> (PathBuf, UnixListener) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let listener = UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        (path, listener)
    }

    /// The tool results of the run's transcript, in order.
    fn tool_results(&self) -> Vec<String> {
        let projects = self.path("roo/projects");
        let project = std::fs::read_dir(&projects)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut sessions: Vec<PathBuf> = std::fs::read_dir(project)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        sessions.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
        let text = std::fs::read_to_string(sessions.last().unwrap()).unwrap();
        let mut results = Vec::new();
        for line in text.lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            if record["type"] != "message" {
                continue;
            }
            for block in record["message"]["content"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if block["type"] == "tool_result" {
                    results.push(block["content"].as_str().unwrap_or_default().to_string());
                }
            }
        }
        results
    }
}

/// How many connections reached `listener` (they wait in its backlog).
fn connections(listener: &UnixListener) -> usize {
    let mut count = 0;
    loop {
        match listener.accept() {
            Ok(_) => count += 1,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return count,
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Why confinement cannot be observed here, if it cannot: the build dir is in a temp
/// dir, or the namespace layer (which alone hides sockets) is not in force although
/// this machine lets a process create user and mount namespaces — then it fails.
fn untestable(world: &World) -> Option<String> {
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        return Some(why);
    }
    let out = world.cli("roo-lead").arg("--print-sandbox").run();
    out.assert_ok();
    let machine_can = std::process::Command::new("unshare")
        .args(["--user", "--mount", "true"])
        .status()
        .is_ok_and(|s| s.success());
    let in_force = out.stdout().contains("namespaces: in force");
    assert!(in_force || !machine_can, "{}", out.stdout());
    (!in_force).then(|| "the namespace layer is not in force here".to_string())
}

fn connect_command(socket: &Path, out: &str) -> String {
    format!(
        "{PYTHON} -c {} {} > {out} 2>&1; echo rc=$? >> {out}",
        shell_quote(CONNECT),
        socket.display()
    )
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Docker Desktop's daemon, the 1Password SSH agent and a `tmux -S` server in the
/// home, none on any list: a command reaches none of them, and `--print-sandbox`
/// names them.
#[test]
fn sockets_anywhere_in_the_home_are_hidden_from_commands() {
    let world = World::new();
    if let Some(why) = untestable(&world) {
        eprintln!("skipped: {why}");
        return;
    }
    if !Path::new(PYTHON).is_file() {
        eprintln!("skipped: {PYTHON} is missing");
        return;
    }
    let servers = [
        world.listen("home/.docker/desktop/docker.sock"),
        world.listen("home/.1password/agent.sock"),
        world.listen("home/.tmux-work.sock"),
        world.listen("home/.local/share/app/x/y/deep.sock"),
    ];
    // The probe itself can connect (the servers are real).
    let probe = std::process::Command::new(PYTHON)
        .args(["-c", CONNECT])
        .arg(&servers[2].0)
        .output()
        .unwrap();
    assert!(connections(&servers[2].1) == 1, "{probe:?}");

    let printed = world.cli("roo-lead").arg("--print-sandbox").run();
    printed.assert_ok();
    for (path, _) in &servers {
        printed.assert_stdout_contains(&format!("hidden: {}", path.display()));
    }

    let commands: Vec<String> = servers
        .iter()
        .enumerate()
        .map(|(i, (path, _))| connect_command(path, &format!("out-{i}.txt")))
        .collect();
    world.lead(&commands).run().assert_ok();
    for (i, (path, listener)) in servers.iter().enumerate() {
        let out = std::fs::read_to_string(world.path(&format!("project/out-{i}.txt")))
            .unwrap_or_else(|e| panic!("the command did not run: {e}"));
        assert_eq!(
            connections(listener),
            0,
            "{} was reachable: {out}",
            path.display()
        );
        assert!(!out.contains("connected"), "{out}");
    }
}

/// A socket on another file system mounted in the home (a tmpfs at `~/data`, as a
/// btrfs subvolume or a mounted disk would be) is found and hidden like any other.
#[test]
fn a_socket_on_another_file_system_in_the_home_is_found() {
    let world = World::new();
    if let Some(why) = untestable(&world) {
        eprintln!("skipped: {why}");
        return;
    }
    if !Path::new(PYTHON).is_file() {
        eprintln!("skipped: {PYTHON} is missing");
        return;
    }
    std::fs::create_dir_all(world.path("home/data")).unwrap();
    let socket = world.path("home/data/app/srv.sock");
    // A mount namespace of the test's own, so the tmpfs goes with it.
    let bind = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\n";
    let script = format!(
        "mount -t tmpfs tmpfs {data} && mkdir {app} && {PYTHON} -c {bind} {socket} && \
         exec {lead} --print-sandbox",
        data = world.path("home/data").display(),
        app = world.path("home/data/app").display(),
        bind = shell_quote(bind),
        socket = socket.display(),
        lead = bin("roo-lead").display(),
    );
    let printed = TestCommand::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(&script)
        .env("ROO_HOME", world.path("roo"))
        .env("HOME", world.path("home"))
        .current_dir(world.path("project"))
        .run();
    printed.assert_ok();
    printed.assert_stdout_contains(&format!("hidden: {}", socket.display()));
}

/// The store runs over TCP (or not at all); the database server's own socket
/// directory, named by `PGHOST` in the user's environment, must be out of reach all
/// the same: its `trust`/`peer` rule would let a command in as the superuser.
#[test]
fn a_database_servers_socket_directory_is_hidden_from_commands() {
    let world = World::new();
    if let Some(why) = untestable(&world) {
        eprintln!("skipped: {why}");
        return;
    }
    let Some(cluster) = roo_tests::pg::OwnCluster::start_in(&world.path("")) else {
        return;
    };
    // Reachable by the command's user where the sandbox does not hide it.
    let dir = cluster.socket_dir().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let user = cluster.superuser.clone();
    let probe = std::process::Command::new("psql")
        .args(["-h"])
        .arg(&dir)
        .args(["-U", &user, "-d", "postgres", "-Atc", "SELECT 4242"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&probe.stdout).contains("4242"),
        "the test server is not reachable: {probe:?}"
    );
    let command = format!(
        "psql -h {d} -U {user} -d postgres -Atc 'SELECT 4242' > psql.txt 2>&1; echo rc=$? >> psql.txt",
        d = dir.display()
    );
    world.lead(&[command]).env("PGHOST", &dir).run().assert_ok();
    let out = std::fs::read_to_string(world.path("project/psql.txt")).unwrap();
    assert!(!out.contains("4242"), "reached the server: {out}");
    assert!(!out.contains("rc=0"), "{out}");
}

/// A prompt-injected command starts a lead that claims the team (`--take-over`), the
/// sandbox's variable removed first: it is refused by what the command cannot remove.
#[test]
fn a_command_cannot_start_a_lead_that_claims_a_team() {
    let world = World::new();
    if let Some(why) = untestable(&world) {
        eprintln!("skipped: {why}");
        return;
    }
    world
        .cli("roo-mail")
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .args(["--member", "carol"])
        .run()
        .assert_ok();
    // A ROO_HOME of the command's own, where a lead could start.
    let script = world.root.write(
        "project/inner.yaml",
        "agents:\n  \"*\":\n    - text: \"I lead now.\"\n",
    );
    let inner = |out: &str| {
        format!(
            "env -u ROO_IN_AGENT_COMMAND ROO_HOME=$PWD/own roo-lead --team t --take-over -p hi \
             --provider script --script {s} > {out} 2>&1; echo rc=$? >> {out}",
            s = script.display()
        )
    };
    world
        .lead(&[
            format!("mkdir -p own && {}", inner("takeover.txt")),
            // The team's own home too (hidden from the command).
            format!(
                "env -u ROO_IN_AGENT_COMMAND roo-lead --team t --take-over -p hi --provider \
                 script --script {s} > takeover2.txt 2>&1; echo rc=$? >> takeover2.txt",
                s = script.display()
            ),
        ])
        .run()
        .assert_ok();
    for file in ["takeover.txt", "takeover2.txt"] {
        let out = std::fs::read_to_string(world.path(&format!("project/{file}"))).unwrap();
        assert!(
            out.contains("lead team t from inside an agent's command"),
            "{file}: {out}"
        );
        assert!(!out.contains("I lead now"), "{file}: {out}");
        assert!(!out.contains("rc=0"), "{file}: {out}");
    }
    // From the user's own terminal the same start is not refused for that reason.
    let out = world
        .cli("roo-lead")
        .args(["--team", "t", "--team-timeout", "1", "-p", "hi"])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .run();
    assert!(
        !out.stderr().contains("from inside an agent's command"),
        "{}",
        out.stderr()
    );
}

/// The resume path: a command runs `roo-lead --continue -p` in a project whose latest
/// session led a team that has no live lead now. It must not lead that team again.
#[test]
fn a_command_cannot_lead_a_team_again_through_continue() {
    let world = World::new();
    // A home the command can reach, whose latest session in the project led team t
    // (its lead has exited; the team is kept).
    let own = world.path("project/own");
    let create = world.root.write(
        "create.yaml",
        "agents:\n  \"*\":\n    - tool_calls:\n        - {name: TeamCreate, input: {team_name: t}}\n    - text: \"Formed.\"\n",
    );
    let first = world
        .cli("roo-lead")
        .env("ROO_HOME", &own)
        .args(["-p", "form a team", "--provider", "script", "--script"])
        .arg(&create)
        .run();
    assert!(
        std::fs::read_to_string(own.join("teams/t/config.json")).is_ok()
            || first.stderr().contains("team t"),
        "team t was formed: {}",
        first.stderr()
    );
    let script = world.root.write(
        "project/inner.yaml",
        "agents:\n  \"*\":\n    - text: \"I lead now.\"\n",
    );
    world
        .lead(&[format!(
            "env -u ROO_IN_AGENT_COMMAND ROO_HOME=$PWD/own roo-lead --continue -p hi \
             --provider script --script {s} > resume.txt 2>&1; echo rc=$? >> resume.txt",
            s = script.display()
        )])
        .run()
        .assert_ok();
    let out = std::fs::read_to_string(world.path("project/resume.txt")).unwrap();
    assert!(!out.contains("leading team t again"), "{out}");
    assert!(
        out.contains("lead team t from inside an agent's command"),
        "{out}"
    );
    // From the user's own terminal the same start leads the team again.
    let again = world
        .cli("roo-lead")
        .env("ROO_HOME", &own)
        .args(["--continue", "-p", "hi", "--provider", "script", "--script"])
        .arg(&script)
        .run();
    again.assert_stderr_contains("leading team t again");
}

/// Credentials under any name, and a URL with a password under any name, stay out of
/// a command's environment; a name the user passes through reaches it.
#[test]
fn credentials_in_the_environment_do_not_reach_commands() {
    let world = World::new();
    world
        .root
        .write("roo/config.yaml", "sandbox: {pass_env: [NPM_TOKEN]}\n");
    let secrets = [
        ("GITHUB_TOKEN", "ghp-canary-github"),
        ("AWS_SECRET_ACCESS_KEY", "aws-canary-secret"),
        ("MY_PASSWORD", "canary-password"),
        ("DATABASE_URL", "postgres://u:canary-dbpw@h/db"),
        ("GITHUB_PAT", "canary-github-pat"),
        ("MYSQL_PWD", "canary-mysql-pwd"),
        ("HTTP_PROXY", "u:canary-proxypw@proxy:3128"),
    ];
    let mut lead = world
        .lead(&["env".to_string()])
        .env("NPM_TOKEN", "npm-canary-passed")
        .env("GIT_AUTHOR_NAME", "Canary Author");
    for (name, value) in secrets {
        lead = lead.env(name, value);
    }
    let out = lead.run();
    out.assert_ok();
    let results = world.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    for (name, value) in secrets {
        assert!(!results[0].contains(value), "{name} leaked: {}", results[0]);
    }
    assert!(
        results[0].contains("NPM_TOKEN=npm-canary-passed"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains("GIT_AUTHOR_NAME=Canary Author"),
        "{}",
        results[0]
    );
    let printed = world
        .cli("roo-lead")
        .arg("--print-sandbox")
        .env("GITHUB_TOKEN", "ghp-canary-github")
        .env("DATABASE_URL", "postgres://u:canary-dbpw@h/db")
        .run();
    printed.assert_ok();
    let line = printed
        .stdout()
        .lines()
        .find(|l| l.starts_with("environment removed from commands"))
        .unwrap_or_default()
        .to_string();
    for name in ["DATABASE_URL", "GITHUB_TOKEN"] {
        assert!(line.split(' ').any(|w| w == name), "{line}");
    }
    assert!(!printed.stdout().contains("canary"), "{}", printed.stdout());
}

/// The same rule for an in-process teammate's and a sub-agent's commands: the lead's
/// environment holds the credentials, their `env` shows none of them.
#[test]
fn credentials_do_not_reach_a_teammates_or_a_sub_agents_commands() {
    let world = World::new();
    // Where the commands report: the temp dir (a teammate's unchanged clone is removed
    // when the run ends).
    let signals = TempDir::new();
    let env_to = |file: &str| {
        serde_json::to_string(&format!("env > {}/{file}", signals.path().display())).unwrap()
    };
    let script = format!(
        r#"agents:
  lead:
    - tool_calls:
        - {{name: Agent, input: {{description: "looks around", prompt: "Run env.", subagent_type: general-purpose}}}}
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew, description: "one job"}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: mal, description: "does a job", prompt: "Do the job."}}}}
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
  "general-purpose":
    - tool_calls:
        - {{name: Bash, input: {{command: {sub}}}}}
    - text: "Looked."
  mal:
    - tool_calls:
        - {{name: Bash, input: {{command: {mate}}}}}
    - text: "Job done."
"#,
        sub = env_to("sub-env.txt"),
        mate = env_to("mate-env.txt"),
    );
    let script = world.root.write("script.yaml", script);
    let out = world
        .cli("roo-lead")
        .env("GITHUB_TOKEN", "ghp-canary-github")
        .env("DATABASE_URL", "postgres://u:canary-dbpw@h/db")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["-p", "Do one job with a teammate."])
        .args(["--provider", "script", "--script"])
        .arg(script)
        .args(["--permission-mode", "bypassPermissions"])
        .args(["--teammate-mode", "in-process"])
        .run();
    out.assert_ok();
    for file in ["sub-env.txt", "mate-env.txt"] {
        let env = std::fs::read_to_string(signals.join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}; {}", out.stderr()));
        assert!(env.contains("PATH="), "{file}: {env}");
        assert!(!env.contains("canary"), "{file}: {env}");
    }
}

/// Without the namespace layer, `--print-sandbox` says which sockets of the home stay
/// reachable, and the start-up notice names them among what is not contained.
#[test]
fn without_namespaces_the_home_sockets_are_named_as_reachable() {
    let world = World::new();
    world
        .root
        .write("roo/config.yaml", "sandbox:\n  namespaces: false\n");
    let (socket, _listener) = world.listen("home/.docker/desktop/docker.sock");
    let printed = world.cli("roo-lead").arg("--print-sandbox").run();
    printed.assert_ok();
    printed.assert_stdout_contains(&format!(
        "reachable (no namespace layer): {}",
        socket.display()
    ));
    printed.assert_stdout_contains("database servers, any socket in your home");
}

/// Without the namespace layer (no covers in the mount table) the helper among the
/// command's ancestors still tells the lead it runs inside a command.
#[test]
fn without_namespaces_a_command_cannot_start_a_lead_that_claims_a_team_either() {
    let world = World::new();
    world
        .root
        .write("roo/config.yaml", "sandbox:\n  namespaces: false\n");
    let script = world.root.write(
        "project/inner.yaml",
        "agents:\n  \"*\":\n    - text: \"I lead now.\"\n",
    );
    world
        .lead(&[format!(
            "mkdir -p own && env -u ROO_IN_AGENT_COMMAND ROO_HOME=$PWD/own roo-lead --team t \
             -p hi --provider script --script {s} > takeover.txt 2>&1; echo rc=$? >> takeover.txt",
            s = script.display()
        )])
        .run()
        .assert_ok();
    let out = std::fs::read_to_string(world.path("project/takeover.txt")).unwrap();
    assert!(
        out.contains("lead team t from inside an agent's command"),
        "{out}"
    );
    assert!(out.contains("is an agent's command helper"), "{out}");
    assert!(!out.contains("rc=0"), "{out}");
}
