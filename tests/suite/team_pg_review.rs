//! Hostile review of the team runtime on the PostgreSQL store (issue 21): how the store's
//! URL and password file are read, against real servers and real processes.
//!
//! Skipped without `ROO_TEST_PG_DSN` (`scripts/test` starts a throwaway server).

use std::path::Path;

use roo_tests::pg::{OwnCluster, fresh_schema_url, psql, test_dsn};
use roo_tests::{TempDir, TestCommand, bin};

/// A fake PostgreSQL server on 127.0.0.1:5432 (Perl, from Debian's essential perl-base):
/// it asks every client for its password in clear text and appends what it gets to the
/// file named by its argument (`<file>.ready` once it listens).
const FAKE_SERVER: &str = r#"
use strict; use IO::Socket::INET;
my $out = shift;
my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 5432, Listen => 8,
    ReuseAddr => 1) or die "bind: $!";
open(my $r, ">", "$out.ready") or die; close $r;
sub take { my ($c, $n) = @_; my $b = ""; while (length($b) < $n) {
    my $got = sysread($c, my $part, $n - length($b)); return undef unless $got; $b .= $part }
    return $b }
while (my $c = $s->accept) {
    my $n = take($c, 4) // next; my $body = take($c, unpack("N", $n) - 4) // next;
    if (length($body) == 4 && unpack("N", $body) == 80877103) {
        syswrite($c, "N"); $n = take($c, 4) // next; $body = take($c, unpack("N", $n) - 4) // next;
    }
    syswrite($c, pack("aNN", "R", 8, 3));
    take($c, 1) // next; $n = take($c, 4) // next; my $pw = take($c, unpack("N", $n) - 4) // next;
    open(my $f, ">>", $out) or die; print $f "caught: $pw\n"; close $f; close $c;
}
"#;

/// libpq reads `postgresql://user:password@localhost/db?host=<dir>` (what
/// scripts/pg-cluster prints) as the socket in `<dir>` only: `host=` in the query replaces
/// the host before it. The store also tried TCP localhost:5432 first, where any local
/// process may listen, and sent the password to whatever answered there. A command the
/// model runs may listen there (the network is on): it asked its own relayed `roo-mail`
/// for the password in clear text and got the store's.
#[test]
fn a_command_cannot_catch_the_store_password_on_a_tcp_port_a_socket_url_does_not_name() {
    let Some(dsn) = test_dsn() else { return };
    let Some((user, rest)) = dsn
        .strip_prefix("postgresql://")
        .and_then(|rest| rest.split_once("@localhost/"))
        .filter(|(_, rest)| rest.contains("host=/"))
    else {
        eprintln!("skipped: {dsn} is not scripts/pg-cluster's socket URL");
        return;
    };
    if std::net::TcpListener::bind("127.0.0.1:5432").is_err() {
        eprintln!("skipped: something listens on 127.0.0.1:5432 already");
        return;
    }
    let perl = std::process::Command::new("perl")
        .args(["-MIO::Socket::INET", "-e", "1"])
        .status();
    if !perl.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no perl with IO::Socket::INET");
        return;
    }
    let canary = "pw-canary-5432";
    let url = fresh_schema_url(&format!("postgresql://{user}:{canary}@localhost/{rest}"));

    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    for dir in ["home", "roo"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    root.write("project/fake-server.pl", FAKE_SERVER);
    roo_tests::git_repo_with_identity(&root.join("project"));
    let attack = "perl fake-server.pl \"$PWD/caught\" & \
                  for i in $(seq 100); do [ -f caught.ready ] && break; sleep 0.1; done; \
                  roo-mail team show; kill $!; wait";
    let script = root.write(
        "script.yaml",
        format!(
            "agents:\n  \"*\":\n    - tool_calls:\n        - {{name: TeamCreate, input: \
             {{team_name: crew}}}}\n    - tool_calls:\n        - {{name: Bash, input: {}}}\n    \
             - text: \"Done.\"\n",
            serde_json::json!({ "command": attack })
        ),
    );
    let out = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", root.join("roo"))
        .env("HOME", root.join("home"))
        .env("ROO_STORE", &url)
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin("roo-mail").parent().unwrap().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .current_dir(root.join("project"))
        .args(["-p", "go", "--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .args(["--output-format", "stream-json"])
        .run();
    out.assert_ok();
    assert!(
        root.join("project/caught.ready").exists(),
        "the command's server never listened: {}",
        out.stdout()
    );
    // The relayed `roo-mail` reached the store, and nothing reached the command's server.
    assert!(out.stdout().contains("lead@crew"), "{}", out.stdout());
    let caught = std::fs::read_to_string(root.join("project/caught")).unwrap_or_default();
    assert!(!caught.contains(canary), "the command caught it: {caught}");
    assert!(!out.stdout().contains(canary), "{}", out.stdout());
}

/// The password file is "read as libpq reads it" (README, PROTOCOL.md §8): each case is
/// judged by `psql` (libpq) with the same file and URL, on a server that asks every
/// connection for a password. libpq matches a socket connection's host field against the
/// socket's directory (`localhost` only for its default one), a URL without a user
/// against the OS user, and takes the password up to the next unescaped `:`; `\*` is a
/// literal star.
#[test]
fn the_password_file_is_read_as_libpq_reads_it() {
    let Some(cluster) = OwnCluster::start() else {
        return;
    };
    let os_user = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .name;
    let su = cluster.superuser.clone();
    let password = "pw-4f1c";
    if os_user != su {
        psql(
            &cluster.dsn,
            &format!("CREATE ROLE \"{os_user}\" LOGIN SUPERUSER PASSWORD '{password}'"),
        );
    }
    psql(
        &cluster.dsn,
        &format!("ALTER ROLE \"{su}\" PASSWORD '{password}'"),
    );
    cluster.require_passwords();

    let dir = cluster.socket_dir().display().to_string();
    let encoded = dir.replace('/', "%2F");
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(root.join("home")).unwrap();
    let cases = [
        (
            "a line for the socket's directory",
            format!("{dir}:5432:postgres:{su}:{password}\n"),
            format!("postgresql://{su}@{encoded}/postgres"),
        ),
        (
            "a line for localhost, not the socket",
            format!("localhost:5432:postgres:{su}:{password}\n"),
            format!("postgresql://{su}@{encoded}/postgres"),
        ),
        (
            "a URL without a user: the OS user",
            format!("*:5432:postgres:{os_user}:{password}\n"),
            format!("postgresql://{encoded}/postgres"),
        ),
        (
            "a field after the password",
            format!("*:*:*:{su}:{password}:a note\n"),
            format!("postgresql://{su}@{encoded}/postgres"),
        ),
        (
            "an escaped star is a star, not a wildcard",
            format!("\\*:5432:postgres:{su}:{password}\n"),
            format!("postgresql://{su}@{encoded}/postgres"),
        ),
        (
            "scripts/pg-cluster's URL: the socket of host=",
            format!("{dir}:5432:postgres:{su}:{password}\n"),
            cluster.dsn.clone(),
        ),
    ];
    let mut connected = 0;
    let mut differ = Vec::new();
    for (i, (what, line, url)) in cases.iter().enumerate() {
        let file = root.write(format!("pgpass-{i}"), line);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let libpq = std::process::Command::new("psql")
            .args(["-w", url, "-Atc", "SELECT 1"])
            .env("HOME", root.join("home"))
            .env("PGPASSFILE", &file)
            .env_remove("PGPASSWORD")
            .env_remove("PGUSER")
            .output()
            .unwrap();
        let home = roo_tests::TempHome::new();
        let roo = home
            .mail()
            .env("HOME", root.join("home"))
            .env("PGPASSFILE", &file)
            .env_remove("PGPASSWORD")
            .env("ROO_STORE", url)
            .args(["team", "show", "--team", "nosuch"])
            .run();
        // Connected: the team is not found (2); not connected: the store failed (3).
        assert!([2, 3].contains(&roo.code()), "{what}: {}", roo.stderr());
        if (roo.code() == 2) != libpq.status.success() {
            differ.push(format!(
                "{what} ({line:?}, {url}): psql {}, roo-mail {}",
                if libpq.status.success() {
                    "connected".to_string()
                } else {
                    String::from_utf8_lossy(&libpq.stderr).trim().to_string()
                },
                if roo.code() == 2 {
                    "connected".to_string()
                } else {
                    roo.stderr().trim().to_string()
                }
            ));
        }
        connected += usize::from(libpq.status.success());
    }
    assert_eq!(differ, Vec::<String>::new(), "roo-mail and libpq differ");
    assert_eq!(connected, 4, "libpq connects with 4 of the 6 files");
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
    for dir in ["home", "here", "there"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
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

/// PERMISSIONS.md: the store's credentials "go the same way" as the API keys, which
/// leave commands' environment whatever variable holds them. `ROO_STORE` and
/// `PGPASSWORD` were sealed by name, but the same URL in `DATABASE_URL` (where users keep
/// it and set `ROO_STORE` from) or the password in another variable reached every
/// command the model ran.
#[test]
fn the_store_url_and_password_leave_commands_whatever_variable_holds_them() {
    let Some(url) = roo_tests::pg::store_url() else {
        return;
    };
    let Some((user, rest)) = url
        .strip_prefix("postgresql://")
        .and_then(|rest| rest.split_once('@'))
        .filter(|(user, _)| !user.contains(':'))
    else {
        eprintln!("skipped: {url} carries a password already");
        return;
    };
    // The test server trusts its clients: the password is only carried.
    let password = "pw-canary-in-env";
    let url = format!("postgresql://{user}:{password}@{rest}");
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    for dir in ["home", "roo"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    root.write("project/README.md", "# demo\n");
    roo_tests::git_repo_with_identity(&root.join("project"));
    let command = "printf '%s|%s|%s' \"${DATABASE_URL:-unset}\" \"${DB_PASSWORD:-unset}\" \
                   \"${ROO_STORE:-unset}\" > seen";
    let script = root.write(
        "script.yaml",
        format!(
            "agents:\n  \"*\":\n    - tool_calls:\n        - {{name: Bash, input: {}}}\n    \
             - text: \"Done.\"\n",
            serde_json::json!({ "command": command })
        ),
    );
    TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", root.join("roo"))
        .env("HOME", root.join("home"))
        .env("ROO_STORE", &url)
        .env("DATABASE_URL", &url)
        .env("DB_PASSWORD", password)
        .env_remove("PGPASSWORD")
        .current_dir(root.join("project"))
        .args(["-p", "go", "--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .run()
        .assert_ok();
    assert_eq!(
        std::fs::read_to_string(root.join("project/seen")).unwrap(),
        "unset|unset|unset"
    );
}
