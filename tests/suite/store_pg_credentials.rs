//! The PostgreSQL store's credentials (README: "the password is never printed";
//! PERMISSIONS.md: they leave commands' environment as the API keys do; PROTOCOL.md §8:
//! the password file is read as libpq reads it), through the real binaries, against
//! real servers and real processes. The tests that need a server are skipped without
//! `ROO_TEST_PG_DSN` (`scripts/test` starts a throwaway one).

use std::path::Path;

use roo_tests::pg::{OwnCluster, fresh_schema_url, psql, test_dsn};
use roo_tests::{TempDir, TempHome, TestCommand, bin, path_with_bins};

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

/// A root under the build's temp dir (outside /tmp, which the command sandbox leaves
/// writable) with `home`, `roo` and a committed git `project` holding `file`.
fn lead_root(file: &str, contents: &str) -> TempDir {
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    root.make_dirs(&["home", "roo"]);
    root.write(Path::new("project").join(file), contents);
    roo_tests::git_repo_with_identity(&root.join("project"));
    root
}

/// `roo-lead -p go` in `root`'s project on the store at `url` with the scripted model of
/// `script`, every permission granted, no `PGPASSWORD`.
fn scripted_lead(root: &TempDir, url: &str, script: &Path) -> TestCommand {
    TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", root.join("roo"))
        .env("HOME", root.join("home"))
        .env("ROO_STORE", url)
        .env_remove("PGPASSWORD")
        .current_dir(root.join("project"))
        .args(["-p", "go", "--provider", "script", "--script"])
        .arg(script)
        .args(["--permission-mode", "bypassPermissions"])
}

/// README: "the password is never printed". roo-lead failing to reach the store must not
/// print a password given as `?password=` (libpq's and tokio-postgres's query parameter).
#[test]
fn the_runtime_never_prints_a_password_from_the_query_string() {
    let env = TempHome::new();
    let out = env
        .cmd("roo-lead")
        .env(
            "ROO_STORE",
            "postgresql://db.example/roo?user=roo&password=s3cret",
        )
        .args(["-p", "hi"])
        .run();
    assert_eq!(out.code(), 3, "{}", out.stderr());
    assert!(
        out.stderr().contains("db.example:5432/roo"),
        "{}",
        out.stderr()
    );
    assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
}

/// The same promise for a refused value: the libpq keyword/value form, which psql and
/// most tools accept, is refused (exit 2) with the password in the message.
#[test]
fn a_refused_store_setting_never_prints_its_password() {
    let env = TempHome::new();
    let out = env
        .task()
        .env(
            "ROO_STORE",
            "host=db.example user=roo password=s3cret dbname=roo",
        )
        .args(["list", "--team", "t"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
    assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
}

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

    let root = lead_root("fake-server.pl", FAKE_SERVER);
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
    let out = scripted_lead(&root, &url, &script)
        .env_remove("PGPASSFILE")
        .env("PATH", path_with_bins())
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
    let root = lead_root("README.md", "# demo\n");
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
    scripted_lead(&root, &url, &script)
        .env("DATABASE_URL", &url)
        .env("DB_PASSWORD", password)
        .run()
        .assert_ok();
    assert_eq!(
        std::fs::read_to_string(root.join("project/seen")).unwrap(),
        "unset|unset|unset"
    );
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
