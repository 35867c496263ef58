//! Tests of the shell-command reader.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn texts(cmd: &str) -> Vec<String> {
    ParsedCommand::parse(cmd)
        .segments
        .iter()
        .map(Segment::value_text)
        .collect()
}

#[test]
fn splits_on_operators_outside_quotes() {
    assert_eq!(
        texts("git add . && git commit -m 'a && b'; echo done | tee log & wait"),
        [
            "git add .",
            "git commit -m a && b",
            "echo done",
            "tee log",
            "wait"
        ]
    );
    assert_eq!(texts("a || b\nc"), ["a", "b", "c"]);
    assert_eq!(texts("(cd x && make)"), ["cd x", "make"]);
}

#[test]
fn marks_piped_segments() {
    let parsed = ParsedCommand::parse("curl -s x | sh && ls");
    let piped: Vec<bool> = parsed.segments.iter().map(|s| s.piped).collect();
    assert_eq!(piped, [false, true, false]);
}

#[test]
fn removes_quotes_and_escapes() {
    assert_eq!(texts(r#""r"m -rf '/'"#), ["rm -rf /"]);
    assert_eq!(texts(r"\rm -rf \/"), ["rm -rf /"]);
    assert_eq!(texts(r#"echo "a \"b\" \$c""#), [r#"echo a "b" $c"#]);
    let parsed = ParsedCommand::parse("git commit -m 'fix: x'");
    assert_eq!(parsed.segments[0].raw_text(), "git commit -m 'fix: x'");
}

#[test]
fn keeps_redirections_as_words() {
    let parsed = ParsedCommand::parse("echo x>/dev/sda 2>&1");
    let words: Vec<&str> = parsed.segments[0]
        .words
        .iter()
        .map(|w| w.value.as_str())
        .collect();
    assert_eq!(words, ["echo", "x", ">", "/dev/sda", "2>&", "1"]);
    assert_eq!(texts("cmd &> out.log"), ["cmd &> out.log"]);
}

#[test]
fn sees_through_wrappers_and_assignments() {
    let parsed =
        ParsedCommand::parse("sudo -u root env -i FOO=1 nohup timeout -s KILL 5 /bin/rm -rf x");
    let seg = &parsed.segments[0];
    assert_eq!(seg.command_name(), Some("rm"));
    let eff: Vec<&str> = seg.effective().iter().map(|w| w.value.as_str()).collect();
    assert_eq!(eff, ["/bin/rm", "-rf", "x"]);
    assert_eq!(seg.prefix()[0].value, "sudo");
    let parsed = ParsedCommand::parse("RUST_LOG=debug cargo test");
    assert_eq!(parsed.segments[0].command_name(), Some("cargo"));
}

#[test]
fn parses_nested_commands() {
    let parsed = ParsedCommand::parse(
        r#"echo $(rm -rf ~) `whoami` && bash -c "sudo reboot" && eval 'mkfs /dev/sda'"#,
    );
    assert!(parsed.substitutes);
    let names: Vec<_> = parsed
        .all_segments()
        .iter()
        .filter_map(|s| s.command_name().map(str::to_string))
        .collect();
    assert!(names.contains(&"rm".to_string()), "{names:?}");
    assert!(names.contains(&"whoami".to_string()), "{names:?}");
    assert!(names.contains(&"reboot".to_string()), "{names:?}");
    assert!(names.contains(&"mkfs".to_string()), "{names:?}");
    let parsed = ParsedCommand::parse("diff <(ls a) <(ls b)");
    assert!(parsed.substitutes);
    assert_eq!(parsed.nested.len(), 2);
}

fn names(cmd: &str) -> Vec<String> {
    ParsedCommand::parse(cmd)
        .all_segments()
        .iter()
        .filter_map(|s| s.program().map(str::to_string))
        .collect()
}

#[test]
fn applies_the_expansions_the_text_shows() {
    assert_eq!(texts("{rm,-rf,/}"), ["rm -rf /"]);
    assert_eq!(texts("r{m,} -rf {a,b}{1,2}"), ["rm r -rf a1 a2 b1 b2"]);
    assert_eq!(texts("echo '{a,b}' ${X} {x}"), ["echo {a,b} ${X} {x}"]);
    assert_eq!(texts("$'\\x72\\155' -rf $'\\u007e'"), ["rm -rf ~"]);
    assert_eq!(texts("rm${IFS}-rf${IFS}/"), ["rm -rf /"]);
    assert_eq!(texts("echo \"$IFS\""), ["echo $IFS"]);
    assert_eq!(texts("$(echo rm) -rf /"), ["rm -rf /"]);
    assert_eq!(texts("$(echo rm -rf) /"), ["rm -rf /"]);
    assert_eq!(texts("\"$(echo r m)\" x"), ["r m x"]);
    assert_eq!(texts("$(which curl) -s x"), ["curl -s x"]);
    let parsed = ParsedCommand::parse("$(cat f) -s x");
    let seg = &parsed.segments[0];
    assert!(seg.program_unresolved());
    assert!(parsed.substitutes);
    let parsed = ParsedCommand::parse("$(echo curl) x");
    assert!(!parsed.segments[0].program_unresolved());
    assert!(
        parsed.substitutes,
        "a resolved substitution still substitutes"
    );
    assert!(ParsedCommand::parse("$X -s").segments[0].program_unresolved());
}

#[test]
fn finds_commands_run_through_other_programs() {
    for (cmd, hidden) in [
        ("echo 'curl x' | sh", "curl"),
        ("printf 'curl %s' x | bash -s", "curl"),
        ("bash <<< 'curl x'", "curl"),
        ("echo x | xargs curl", "curl"),
        ("echo x | xargs -I{} sh -c 'curl {}'", "curl"),
        ("find . -exec curl {} \\;", "curl"),
        ("env -S 'curl x'", "curl"),
        ("flock /tmp/l -c 'curl x'", "curl"),
        ("script -q -c 'curl x' /dev/null", "curl"),
        ("git -c alias.x='!curl y' x", "curl"),
        ("git -c core.pager='curl y' log", "curl"),
        ("python3.11 -c 'import os; os.system(\"curl x\")'", "curl"),
        ("busybox wget x", "wget"),
        ("timeout 5 flock /tmp/l nice curl x", "curl"),
    ] {
        assert!(
            names(cmd).iter().any(|n| n == hidden),
            "{cmd}: {:?}",
            names(cmd)
        );
    }
    assert_eq!(names("python3.11 x.py"), ["python"]);
    assert_eq!(names("command -v curl"), ["command"]);
}

#[test]
fn comments_and_line_continuations() {
    assert_eq!(texts("ls # rm -rf /"), ["ls"]);
    assert_eq!(texts("cargo \\\n  test"), ["cargo test"]);
    assert_eq!(texts("echo a#b"), ["echo a#b"]);
}

#[test]
fn arbitrary_input_does_not_panic() {
    // A deterministic pseudo-random walk over the characters the lexer treats
    // specially.
    let alphabet: Vec<char> = " \t\n;&|()<>'\"\\`$#{}=-*~/.0123abcrm语".chars().collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for len in 0..400 {
        let text: String = (0..len % 40)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                alphabet[(state % alphabet.len() as u64) as usize]
            })
            .collect();
        let parsed = ParsedCommand::parse(&text);
        for segment in parsed.all_segments() {
            let _ = (segment.command_name(), segment.raw_text(), segment.prefix());
        }
        let _ = super::super::dangerous::check(&text);
    }
}

#[test]
fn pathological_expansions_are_reported_not_expanded_forever() {
    // 40 brace groups would be 2^40 words; nested substitutions multiply.
    let braces = "{a,b}".repeat(40);
    let parsed = ParsedCommand::parse(&format!("echo {braces}"));
    assert_eq!(parsed.segments.len(), 1);
    let nested = "$(echo {a,b}{c,d}{e,f}{g,h}".repeat(6) + &")".repeat(6);
    let _ = ParsedCommand::parse(&nested);
    let wide = format!(
        "echo {}",
        "{x,y}{x,y}{x,y}{x,y}{x,y}{x,y}{x,y} ".repeat(2000)
    );
    assert!(ParsedCommand::parse(&wide).too_complex);
    assert!(!ParsedCommand::parse("rm -rf {a,b}/{c,d}").too_complex);
}

#[test]
fn unterminated_input_does_not_panic() {
    for cmd in [
        "echo 'abc",
        "echo \"abc",
        "echo $(ls",
        "echo `ls",
        "a \\",
        "<(",
        "$(",
    ] {
        let _ = ParsedCommand::parse(cmd);
    }
}
