//! The scripted provider through its public entry points: settings, state file shared
//! across "processes" (provider instances), delays and cancellation.

use std::time::{Duration, Instant};

use roo_llm::{LlmFlags, LlmSettings, Message, Request, build_provider, collect};

use super::support::TempDir;

fn request(agent: &str) -> Request {
    Request {
        agent: agent.into(),
        messages: vec![Message::user_text("go")],
        ..Request::default()
    }
}

#[tokio::test]
async fn a_restarted_process_continues_where_it_left_off() {
    let dir = TempDir::new("state");
    let script = dir.path().join("team.yaml");
    std::fs::write(
        &script,
        "agents:\n  lead:\n    - text: lead one\n    - text: lead two\n  \"*\":\n    - text: worker one\n      tool_calls: [{name: TaskList}]\n    - text: worker two\n      tool_calls: [{name: TaskList}]\n",
    )
    .unwrap();
    let state = dir.path().join("state/cursors.json");
    let env = {
        let state = state.display().to_string();
        move |k: &str| (k == "ROO_SCRIPT_STATE").then(|| state.clone())
    };
    let flags = LlmFlags {
        script: Some(script.clone()),
        ..LlmFlags::default()
    };
    let settings = LlmSettings::resolve(&flags, &env, &[]).unwrap();

    let first = build_provider(&settings).unwrap();
    let r = collect(first.stream(request("lead")), |_| {})
        .await
        .unwrap();
    assert_eq!(r.message.text(), "lead one");
    let r = collect(first.stream(request("bob")), |_| {}).await.unwrap();
    assert_eq!(r.message.text(), "worker one");
    assert_eq!(r.message.tool_uses().next().unwrap().0, "toolu_script_1");
    drop(first);

    // "Restart": a new provider over the same state file.
    let second = build_provider(&settings).unwrap();
    let r = collect(second.stream(request("lead")), |_| {})
        .await
        .unwrap();
    assert_eq!(r.message.text(), "lead two");
    let r = collect(second.stream(request("bob")), |_| {})
        .await
        .unwrap();
    assert_eq!(r.message.text(), "worker two");
    assert_eq!(r.message.tool_uses().next().unwrap().0, "toolu_script_2");
    // Another worker starts its own pass over the default script.
    let r = collect(second.stream(request("carol")), |_| {})
        .await
        .unwrap();
    assert_eq!(r.message.text(), "worker one");
    let err = collect(second.stream(request("lead")), |_| {})
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("the script for agent lead has no turn left after 2"),
        "{err}"
    );
    assert!(state.exists());
}

#[tokio::test]
async fn delays_apply_and_dropping_cancels() {
    let dir = TempDir::new("delay");
    let script = dir.path().join("slow.json");
    std::fs::write(
        &script,
        r#"{"agents": {"*": [{"text": "slow", "delay_ms": 200}, {"text": "next"}]}}"#,
    )
    .unwrap();
    let settings = LlmSettings::resolve(
        &LlmFlags {
            provider: Some("script".into()),
            script: Some(script),
            ..LlmFlags::default()
        },
        &|_| None,
        &[],
    )
    .unwrap();
    let provider = build_provider(&settings).unwrap();
    assert_eq!(provider.name(), "script");
    let started = Instant::now();
    let r = collect(provider.stream(request("a")), |_| {})
        .await
        .unwrap();
    assert_eq!(r.message.text(), "slow");
    assert!(started.elapsed() >= Duration::from_millis(200));
    // A cancelled (dropped) request before it is polled uses no turn.
    drop(provider.stream(request("a")));
    let r = collect(provider.stream(request("a")), |_| {})
        .await
        .unwrap();
    assert_eq!(r.message.text(), "next");
}

#[tokio::test]
async fn a_broken_script_names_the_file() {
    let dir = TempDir::new("broken");
    let script = dir.path().join("bad.yaml");
    std::fs::write(&script, "agents:\n  \"*\":\n    - txt: typo\n").unwrap();
    let mut settings = LlmSettings::defaults(roo_llm::ProviderKind::Script);
    settings.script = Some(script.clone());
    let err = build_provider(&settings).err().unwrap();
    let text = err.to_string();
    assert!(text.contains("bad.yaml"), "{text}");
    assert!(text.contains("txt"), "{text}");
}
