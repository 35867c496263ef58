//! The workspace's shape, pinned (docs/ARCHITECTURE.md "Rules the tests hold"): no
//! function a reader cannot hold, no import circle that spans folders in any crate, and a
//! narrow `roo-agent` surface.
//!
//! The checks read the source as text. They are deliberately simple (a brace counter
//! and `use`/path scanning), which is enough for this workspace's rustfmt-formatted code:
//! each has a small self-test on a sample so that a change in the scanner cannot make it
//! pass vacuously.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// The longest a non-test function may be, in lines from its `fn` line to its closing
/// brace (STYLE.md: split past ~100 lines into named steps).
const MAX_FUNCTION_LINES: usize = 150;

/// The library crates under `shared/`, each of whose module graph may hold no circle across
/// folders: all of them (the binaries are thin and flat).
const ACYCLIC_CRATES: [&str; 7] = ["store", "llm", "cli", "term", "agent", "team", "app"];

/// The most public modules `roo-agent` may expose.
const MAX_AGENT_PUBLIC_MODULES: usize = 8;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

fn rust_files(root: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source of every library and binary file (no `tests/`, `benches/`, `tests.rs`).
fn source_files() -> Vec<PathBuf> {
    let root = workspace();
    let mut files = Vec::new();
    for top in ["shared", "bins"] {
        let Ok(crates) = fs::read_dir(root.join(top)) else {
            continue;
        };
        for krate in crates.flatten() {
            rust_files(&krate.path().join("src"), &mut files);
        }
    }
    files.retain(|p| !p.ends_with("tests.rs") && !p.components().any(|c| c.as_os_str() == "tests"));
    files.sort();
    files
}

/// The text before the file's `#[cfg(test)] mod … {` block, if any.
fn without_test_module(text: &str) -> &str {
    static TEST_MODULE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?m)^\s*#\[cfg\(test\)\]\s*\n\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{")
            .expect("valid regex")
    });
    match TEST_MODULE.find(text) {
        Some(m) => &text[..m.start()],
        None => text,
    }
}

/// Blanks string and char literals and line comments so braces in them do not count.
fn code_only(line: &str) -> String {
    static STRINGS: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#""(\\.|[^"\\])*""#).expect("valid regex"));
    static CHARS: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"'(\\.|[^'\\])'").expect("valid regex"));
    if !line.contains(['"', '\'', '/']) {
        return line.to_string();
    }
    let line = STRINGS.replace_all(line, "\"\"");
    let line = CHARS.replace_all(&line, "''");
    match line.find("//") {
        Some(at) => line[..at].to_string(),
        None => line.to_string(),
    }
}

/// `(name, first line (1-based), length in lines)` of every function with a body.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    static FN_LINE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r#"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"[^"]*"\s+)?fn\s+(\w+)"#,
        )
        .expect("valid regex")
    });
    let fn_line = &*FN_LINE;
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(caps) = fn_line.captures(line) else {
            continue;
        };
        let (mut depth, mut opened) = (0i64, false);
        for (end, body_line) in lines.iter().enumerate().skip(start) {
            let code = code_only(body_line);
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if !opened && code.trim_end().ends_with(';') {
                break;
            }
            if opened && depth <= 0 {
                found.push((caps[7].to_string(), start + 1, end - start + 1));
                break;
            }
        }
    }
    found
}

#[test]
fn the_function_scanner_measures_a_sample() {
    let sample = "fn a() {\n    let s = \"}\";\n    if x { y() }\n}\n\npub async fn b(\n    x: u8,\n) -> u8 {\n    x\n}\nfn c();\n";
    assert_eq!(
        functions(sample),
        vec![("a".to_string(), 1, 4), ("b".to_string(), 6, 5)]
    );
}

#[test]
fn no_function_outside_tests_is_longer_than_a_reader_can_hold() {
    let root = workspace();
    let files = source_files();
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut long = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).expect("readable source");
        for (name, line, length) in functions(without_test_module(&text)) {
            if length > MAX_FUNCTION_LINES {
                let shown = file
                    .strip_prefix(&root)
                    .unwrap_or(&file)
                    .display()
                    .to_string();
                long.push(format!("{shown}:{line} fn {name}: {length} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "split these into named steps (at most {MAX_FUNCTION_LINES} lines each):\n{}",
        long.join("\n")
    );
}

/// One crate's modules and the modules each one names.
struct ModuleGraph {
    /// Module path (`["backend", "ssh"]`) to its file.
    files: BTreeMap<Vec<String>, PathBuf>,
    /// Module path to the module paths it refers to.
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

impl ModuleGraph {
    fn read(src: &Path) -> ModuleGraph {
        let mut paths = Vec::new();
        rust_files(src, &mut paths);
        let mut files = BTreeMap::new();
        for path in paths {
            let relative = path.strip_prefix(src).expect("under src");
            let mut module: Vec<String> = relative
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("lib" | "main" | "mod")
            ) {
                module.pop();
            }
            files.insert(module, path);
        }
        let texts: BTreeMap<Vec<String>, String> = files
            .iter()
            .map(|(module, path)| {
                let text = fs::read_to_string(path).expect("readable source");
                let text: String = without_test_module(&text)
                    .lines()
                    .map(code_only)
                    .collect::<Vec<_>>()
                    .join("\n");
                (module.clone(), text)
            })
            .collect();
        let mut graph = ModuleGraph {
            files,
            edges: BTreeMap::new(),
        };
        let reexports = graph.reexports(&texts);
        let path_re = Regex::new(r"\b((?:crate|super|self)(?:::\w+)+)").expect("valid regex");
        let use_re = Regex::new(r"(?s)\buse\s+([^;]+);").expect("valid regex");
        for (module, text) in &texts {
            let mut named = Vec::new();
            for caps in use_re.captures_iter(text) {
                named.extend(graph.expand_use(module, &caps[1]));
            }
            for caps in path_re.captures_iter(text) {
                named.extend(graph.expand_use(module, &caps[1]));
            }
            let targets: BTreeSet<Vec<String>> = named
                .iter()
                .filter_map(|path| graph.target(path, &reexports, 0))
                .filter(|target| target != module)
                .collect();
            graph.edges.insert(module.clone(), targets);
        }
        graph
    }

    /// Every `pub use` in a module: the name it re-exports to the path it came from.
    fn reexports(
        &self,
        texts: &BTreeMap<Vec<String>, String>,
    ) -> BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> {
        let re = Regex::new(r"(?s)\bpub(\([^)]*\))?\s+use\s+([^;]+);").expect("valid regex");
        let mut out: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for (module, text) in texts {
            for caps in re.captures_iter(text) {
                for path in self.expand_use(module, &caps[2]) {
                    if let Some(last) = path.last() {
                        out.entry(module.clone())
                            .or_default()
                            .insert(last.clone(), path.clone());
                    }
                }
            }
        }
        out
    }

    /// A use tree (`crate::a::{b, c::D}`) as absolute module-relative paths; paths into
    /// other crates are dropped.
    fn expand_use(&self, module: &[String], tree: &str) -> Vec<Vec<String>> {
        let mut leaves = Vec::new();
        expand_tree(Vec::new(), tree, &mut leaves);
        let mut out = Vec::new();
        for parts in leaves {
            let Some(first) = parts.first() else {
                continue;
            };
            let absolute = match first.as_str() {
                "crate" => parts[1..].to_vec(),
                "self" => [module, &parts[1..]].concat(),
                "super" => {
                    let mut base = module.to_vec();
                    let mut rest = &parts[..];
                    while rest.first().is_some_and(|p| p == "super") {
                        base.pop();
                        rest = &rest[1..];
                    }
                    [base.as_slice(), rest].concat()
                }
                _ => {
                    let child = [module, &parts[..1]].concat();
                    if self.files.contains_key(&child) {
                        [module, &parts[..]].concat()
                    } else {
                        continue;
                    }
                }
            };
            out.push(absolute);
        }
        out
    }

    /// The module a path lands in, following re-exports to where the item lives.
    fn target(
        &self,
        path: &[String],
        reexports: &BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
        depth: usize,
    ) -> Option<Vec<String>> {
        let split = (0..=path.len())
            .rev()
            .find(|k| self.files.contains_key(&path[..*k]))?;
        let (module, rest) = (path[..split].to_vec(), &path[split..]);
        if depth < 10
            && let Some(first) = rest.first()
            && let Some(origin) = reexports.get(&module).and_then(|names| names.get(first))
            && origin.as_slice() != path
        {
            let followed = [origin.as_slice(), &rest[1..]].concat();
            if let Some(found) = self.target(&followed, reexports, depth + 1) {
                return Some(found);
            }
        }
        Some(module)
    }

    /// The folder a module belongs to: its own folder if it has children.
    fn folder(&self, module: &[String]) -> PathBuf {
        let file = &self.files[module];
        let parent = file.parent().expect("file has a folder").to_path_buf();
        let stem = file.with_extension("");
        if file.ends_with("mod.rs") || file.ends_with("lib.rs") || file.ends_with("main.rs") {
            parent
        } else if stem.is_dir() {
            stem
        } else {
            parent
        }
    }

    /// Strongly connected components with more than one module (Tarjan).
    fn circles(&self) -> Vec<Vec<Vec<String>>> {
        struct Walk<'g> {
            graph: &'g ModuleGraph,
            index: BTreeMap<Vec<String>, usize>,
            low: BTreeMap<Vec<String>, usize>,
            stack: Vec<Vec<String>>,
            on_stack: BTreeSet<Vec<String>>,
            found: Vec<Vec<Vec<String>>>,
        }
        impl Walk<'_> {
            fn visit(&mut self, v: &Vec<String>) {
                let n = self.index.len();
                self.index.insert(v.clone(), n);
                self.low.insert(v.clone(), n);
                self.stack.push(v.clone());
                self.on_stack.insert(v.clone());
                for w in self.graph.edges.get(v).into_iter().flatten() {
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v.clone(), low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v.clone(), low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(&w);
                        let done = &w == v;
                        component.push(w);
                        if done {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        self.found.push(component);
                    }
                }
            }
        }
        let mut walk = Walk {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for v in self.files.keys() {
            if !walk.index.contains_key(v) {
                walk.visit(v);
            }
        }
        walk.found
    }
}

/// Splits a use tree into its leaves, each a list of path segments.
fn expand_tree(prefix: Vec<String>, tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let (mut depth, mut current) = (0, String::new());
        for c in inner.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if c == ',' && depth == 0 {
                expand_tree(prefix.clone(), &current, out);
                current.clear();
            } else {
                current.push(c);
            }
        }
        expand_tree(prefix, &current, out);
        return;
    }
    if let Some(at) = tree.find("::{")
        && tree.ends_with('}')
    {
        let mut next = prefix;
        next.extend(tree[..at].split("::").map(|s| s.trim().to_string()));
        expand_tree(next, &tree[at + 2..], out);
        return;
    }
    let path = tree.split(" as ").next().unwrap_or(tree);
    let mut leaf = prefix;
    leaf.extend(
        path.split("::")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
    );
    out.push(leaf);
}

fn circles_across_folders(src: &Path) -> Vec<String> {
    let graph = ModuleGraph::read(src);
    graph
        .circles()
        .into_iter()
        .filter(|circle| {
            circle
                .iter()
                .map(|m| graph.folder(m))
                .collect::<BTreeSet<_>>()
                .len()
                > 1
        })
        .map(|circle| {
            let mut shown: Vec<String> = circle
                .iter()
                .map(|m| {
                    let file = &graph.files[m];
                    let names: Vec<String> = graph.edges[m]
                        .iter()
                        .filter(|t| circle.contains(t))
                        .map(|t| {
                            graph.files[t]
                                .strip_prefix(src)
                                .unwrap_or(&graph.files[t])
                                .display()
                                .to_string()
                        })
                        .collect();
                    format!(
                        "  {} -> {}",
                        file.strip_prefix(src).unwrap_or(file).display(),
                        names.join(", ")
                    )
                })
                .collect();
            shown.sort();
            shown.join("\n")
        })
        .collect()
}

#[test]
fn the_circle_finder_sees_a_circle_across_folders_and_not_one_inside_a_folder() {
    let dir = tempfile_dir();
    let src = dir.join("src");
    fs::create_dir_all(src.join("a")).expect("mkdir");
    fs::write(
        src.join("lib.rs"),
        "pub mod a;\npub mod b;\npub use a::inner::Thing;\n",
    )
    .expect("write");
    fs::write(src.join("a.rs"), "pub mod inner;\n").expect("write");
    // a/inner.rs names b (through the root's re-export path of nothing) and b names
    // a::inner through the root re-export: a circle across src/a and src.
    fs::write(
        src.join("a/inner.rs"),
        "use crate::b::Other;\npub struct Thing;\n",
    )
    .expect("write");
    fs::write(src.join("b.rs"), "use crate::Thing;\npub struct Other;\n").expect("write");
    let found = circles_across_folders(&src);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("a/inner.rs -> b.rs"), "{found:?}");
    // The same circle inside one folder is allowed.
    fs::write(
        src.join("a/inner.rs"),
        "use super::sibling::Other;\npub struct Thing;\n",
    )
    .expect("write");
    fs::write(src.join("a.rs"), "pub mod inner;\npub mod sibling;\n").expect("write");
    fs::write(
        src.join("a/sibling.rs"),
        "use super::inner::Thing;\npub struct Other;\n",
    )
    .expect("write");
    fs::write(src.join("b.rs"), "pub struct Other;\n").expect("write");
    assert_eq!(circles_across_folders(&src), Vec::<String>::new());
    fs::remove_dir_all(&dir).expect("clean up");
}

fn tempfile_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "structure-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    fs::create_dir_all(&dir).expect("mkdir");
    dir
}

/// Every library crate under `shared/`, the ones added later included (the crate list must
/// match the directory).
#[test]
fn no_import_circle_spans_folders_in_any_crate() {
    let root = workspace();
    let crates: BTreeSet<String> = fs::read_dir(root.join("shared"))
        .expect("read shared/")
        .flatten()
        .filter(|e| e.path().join("src").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        crates,
        ACYCLIC_CRATES.iter().map(|c| c.to_string()).collect(),
        "every crate under shared/ is checked: list a new one in ACYCLIC_CRATES"
    );
    let mut report = Vec::new();
    for krate in ACYCLIC_CRATES {
        for circle in circles_across_folders(&root.join("shared").join(krate).join("src")) {
            report.push(format!("shared/{krate}/src:\n{circle}"));
        }
    }
    assert!(
        report.is_empty(),
        "move the named type or function to the leaf that owns it:\n{}",
        report.join("\n")
    );
}

#[test]
fn roo_agent_exposes_few_modules() {
    let lib = fs::read_to_string(workspace().join("shared/agent/src/lib.rs")).expect("lib.rs");
    let public: Vec<&str> = lib
        .lines()
        .filter(|l| l.trim_start().starts_with("pub mod "))
        .collect();
    assert!(
        public.len() <= MAX_AGENT_PUBLIC_MODULES,
        "roo-agent exposes {} modules (at most {MAX_AGENT_PUBLIC_MODULES}): {public:?}",
        public.len()
    );
    assert!(
        lib.contains("#![warn(missing_docs)]"),
        "roo-agent warns about undocumented public items"
    );
}
