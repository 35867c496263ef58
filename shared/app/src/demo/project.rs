//! The demo's world: a temporary directory with a small git repository whose tests fail
//! in two modules (real work for two teammates), a state directory, and the scripted
//! models' turns. The files are real files of this crate (`shared/app/demo/`), built in.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::exit::AppError;

/// The project: path in the repository, contents, executable.
const PROJECT: [(&str, &str, bool); 7] = [
    (
        "README.md",
        include_str!("../../demo/project/README.md"),
        false,
    ),
    (
        "run-tests",
        include_str!("../../demo/project/run-tests"),
        true,
    ),
    (
        "src/slug.sh",
        include_str!("../../demo/project/src/slug.sh"),
        false,
    ),
    (
        "src/stats.sh",
        include_str!("../../demo/project/src/stats.sh"),
        false,
    ),
    (
        "tests/assert.sh",
        include_str!("../../demo/project/tests/assert.sh"),
        false,
    ),
    (
        "tests/test_slug.sh",
        include_str!("../../demo/project/tests/test_slug.sh"),
        false,
    ),
    (
        "tests/test_stats.sh",
        include_str!("../../demo/project/tests/test_stats.sh"),
        false,
    ),
];

/// The scripted turns of the lead, alice and bob (docs/LLM.md, "Scripted").
pub const SCRIPT: &str = include_str!("../../demo/script.yaml");

/// Name of the project directory (and of the repository) inside the demo directory.
pub const PROJECT_DIR: &str = "textkit";

/// Where the demo lives: `root` is removed at the end unless kept.
pub struct World {
    pub root: tempfile::TempDir,
}

impl World {
    /// A new temporary directory with the repository, the state directory and the script
    /// (each model turn preceded by a pause of `pace_ms`).
    pub fn create(pace_ms: u64) -> Result<World, AppError> {
        let root = tempfile::Builder::new()
            .prefix("roo-demo.")
            .tempdir()
            .map_err(|e| {
                AppError::Io(format!(
                    "failed to create the demo's temporary directory: {e}"
                ))
            })?;
        let world = World { root };
        std::fs::create_dir_all(world.roo_home())
            .map_err(|e| io_error("create", &world.roo_home(), e))?;
        world.write_project()?;
        let script = paced_script(SCRIPT, pace_ms)?;
        std::fs::write(world.script(), script)
            .map_err(|e| io_error("write", &world.script(), e))?;
        Ok(world)
    }

    /// The repository the lead works in.
    pub fn repo(&self) -> PathBuf {
        self.root.path().join(PROJECT_DIR)
    }

    /// The demo's `ROO_HOME`.
    pub fn roo_home(&self) -> PathBuf {
        self.root.path().join("roo-home")
    }

    /// The script file the provider replays.
    pub fn script(&self) -> PathBuf {
        self.root.path().join("script.yaml")
    }

    fn write_project(&self) -> Result<(), AppError> {
        let repo = self.repo();
        for (rel, contents, executable) in PROJECT {
            let path = repo.join(rel);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| io_error("create", dir, e))?;
            }
            std::fs::write(&path, contents).map_err(|e| io_error("write", &path, e))?;
            if executable {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                    .map_err(|e| io_error("make executable", &path, e))?;
            }
        }
        // The repository's own identity and settings: the commits of the teammates and
        // the lead's merges work on a machine without a git identity, and the user's
        // signing or hooks settings do not apply to a throwaway repository.
        let hooks = self.root.path().join("no-hooks");
        let hooks = hooks.to_string_lossy();
        let steps: [&[&str]; 7] = [
            &["init", "-q"],
            &["config", "user.name", "RooCode demo"],
            &["config", "user.email", "demo@roocode.invalid"],
            &["config", "commit.gpgsign", "false"],
            &["config", "core.hooksPath", &hooks],
            &["add", "-A"],
            &[
                "commit",
                "-qm",
                "textkit: slugify and mean, with failing tests",
            ],
        ];
        for args in steps {
            git(&repo, args)?;
        }
        Ok(())
    }
}

fn git(repo: &Path, args: &[&str]) -> Result<(), AppError> {
    let out = Command::new("git")
        .args(args)
        .current_dir(repo)
        .output()
        .map_err(|e| {
            AppError::Io(format!(
                "failed to run git {} in {}: {e}; the demo needs git on PATH",
                args.join(" "),
                repo.display()
            ))
        })?;
    if !out.status.success() {
        return Err(AppError::Io(format!(
            "failed to run git {} in {}: {}",
            args.join(" "),
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

fn io_error(action: &str, path: &Path, e: std::io::Error) -> AppError {
    AppError::Io(format!("failed to {action} {}: {e}", path.display()))
}

/// The script with `delay_ms: pace_ms` on every turn that has none (a pause before the
/// model "answers", so a person can follow); unchanged for 0.
pub fn paced_script(script: &str, pace_ms: u64) -> Result<String, AppError> {
    if pace_ms == 0 {
        return Ok(script.to_string());
    }
    let bad = |e: String| AppError::Config(format!("failed to read the demo script: {e}"));
    let mut doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(script).map_err(|e| bad(e.to_string()))?;
    let agents = doc
        .get_mut("agents")
        .and_then(|a| a.as_mapping_mut())
        .ok_or_else(|| bad("no `agents` map".to_string()))?;
    for (_, turns) in agents.iter_mut() {
        for turn in turns.as_sequence_mut().into_iter().flatten() {
            if let Some(turn) = turn.as_mapping_mut()
                && !turn.contains_key("delay_ms")
            {
                turn.insert("delay_ms".into(), pace_ms.into());
            }
        }
    }
    serde_yaml_ng::to_string(&doc).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_script_parses_and_pacing_adds_a_delay_to_every_turn() {
        roo_llm::script::Script::parse(SCRIPT, false).unwrap();
        let paced = paced_script(SCRIPT, 250).unwrap();
        let script = roo_llm::script::Script::parse(&paced, false).unwrap();
        drop(script);
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&paced).unwrap();
        for (agent, turns) in doc["agents"].as_mapping().unwrap() {
            for turn in turns.as_sequence().unwrap() {
                assert_eq!(turn["delay_ms"].as_u64(), Some(250), "{agent:?}: {turn:?}");
            }
        }
        assert_eq!(paced_script(SCRIPT, 0).unwrap(), SCRIPT);
    }
}
