//! Tests of what an allow rule may approve.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::permissions::shell::ParsedCommand;

fn block(command: &str) -> Option<Blocker> {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let scope = Scope {
        cwd: &root,
        project_root: &root,
    };
    let parsed = ParsedCommand::parse(command);
    assert_eq!(parsed.segments.len(), 1, "{command}");
    blocker(&parsed.segments[0], &scope)
}

#[test]
fn risky_options_and_writes_outside_block_approval() {
    for cmd in [
        "find . -exec sh -c 'id' \\;",
        "find . -name x -delete",
        "find . -fprint /tmp/x",
        "sed '1e id' notes.txt",
        "sed -n '1,5w /tmp/out' notes.txt",
        "sed 's/a/b/e' notes.txt",
        "sed 's/a/b/w /tmp/x' notes.txt",
        "sed -i 's/a/b/' ~/.bashrc",
        "sed -f script.sed x",
        "sed -e p -e 'e id' x",
        "awk 'BEGIN { system(\"id\") }'",
        "awk '{ print > \"/tmp/x\" }' f",
        "awk '{ print | \"sh\" }' f",
        "awk -f prog.awk f",
        "git log --output=../outside/x",
        "git log --out=../x",
        "git -c core.pager=id log",
        "git -C ../other status",
        "git --git-dir=../other/.git log",
        "git rebase -x 'make test' main",
        "git rebase --exec id main",
        "git fetch --upload-pack='id' origin",
        "git clone -u id x y",
        "git config alias.x '!id'",
        "git config --add core.fsmonitor id",
        "git bisect run ./t.sh",
        "git submodule foreach id",
        "git grep -O id x",
        "git format-patch -o /tmp/p HEAD~1",
        "python3 -c 'print(1)'",
        "python3.11 -c 'print(1)'",
        "python -m http.server",
        "perl -e 'print 1'",
        "perl -pie 's/a/b/' x",
        "ruby -e 'p 1'",
        "node -e '1'",
        "node --eval=1",
        "bash -c 'id'",
        "bash -lc 'id'",
        "sh",
        "sh -s",
        "env -S 'id -u'",
        "env -S'id'",
        "xargs rm",
        "watch id",
        "tar --to-command=sh -xf x.tar",
        "tar -xf x.tar --checkpoint-action=exec=id",
        "tar -xf x.tar -C /",
        "rsync -e 'sh -c id' a b",
        "zip -TT id x.zip a",
        "sort -o /tmp/x f",
        "curl -o /tmp/x https://example.com",
        "wget -O /tmp/x https://example.com",
        "echo x > /tmp/out",
        "echo x >> ~/.bashrc",
        "echo x 2> ../err.log",
        "echo x &> /etc/x",
        "echo x > $OUT",
        "echo x > \"$(mktemp)\"",
        "echo $HOME",
        "cat ${FILE}",
        "echo \"$X\"",
        "cp notes.txt ~/.bashrc",
        "mv notes.txt ../x",
        "rm ../x",
        "tee -a ~/.bashrc",
        "touch /tmp/x",
        "ln -s x /tmp/y",
        "dd if=x of=/tmp/y",
        "chmod 777 /etc/passwd",
        "cp -t /tmp a b",
        "cp --target-directory=/tmp a",
    ] {
        assert!(block(cmd).is_some(), "approvable but should not be: {cmd}");
    }
}

#[test]
fn ordinary_commands_are_approvable() {
    for cmd in [
        "find . -name '*.rs'",
        "find src -type f -newer Cargo.toml",
        "sed -n '1,20p' notes.txt",
        "sed 's/foo/bar/g' notes.txt",
        "sed -e 's/a/b/' -e '/x/d' notes.txt",
        "sed '/^#/d; s/x/y/2' f",
        "awk '{ print $1 }' f",
        "awk -F: '{ print $2 }' /etc/passwd",
        "git log --oneline -5",
        "git diff --stat HEAD~1",
        "git status --short",
        "git push -u origin main",
        "git config user.name",
        "python3 script.py",
        "bash scripts/test.sh",
        "ls -la *.rs",
        "cargo test --all > target/test.log 2>&1",
        "cargo build 2> /dev/null",
        "echo done > out/status.txt",
        "echo x >&2",
        "cat < notes.txt",
        "grep -r TODO src",
        "cp notes.txt backup/notes.txt",
        "rm -rf build",
        "mkdir -p out/a",
        "chmod 755 scripts/run.sh",
        "tee out.log",
        "dd if=/dev/zero of=disk.img bs=1M count=1",
        "tar -xzf vendor.tar.gz",
        "curl -s https://example.com/api",
        "echo '$HOME is literal here'",
    ] {
        assert_eq!(block(cmd), None, "wrongly blocked: {cmd}");
    }
}

#[test]
fn sed_scripts_are_read_command_by_command() {
    assert!(!sed_script_risky("s/a/b/g"));
    assert!(!sed_script_risky("s|/usr/bin|/opt/bin|"));
    assert!(!sed_script_risky("1,5d;/x/p"));
    assert!(!sed_script_risky("/begin/,/end/ s/e/E/2"));
    assert!(!sed_script_risky("y/abc/xyz/"));
    assert!(
        !sed_script_risky("s/we/were/"),
        "`w` and `e` inside a pattern are text"
    );
    assert!(sed_script_risky("1e id"));
    assert!(sed_script_risky("$ w out"));
    assert!(sed_script_risky("s/a/b/gw out"));
    assert!(sed_script_risky("s/a/b/e"));
    assert!(sed_script_risky("s/a/b"), "unterminated counts as risky");
    assert!(sed_script_risky("/x/{e id\n}"));
}
