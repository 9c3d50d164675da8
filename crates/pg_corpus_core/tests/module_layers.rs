//! The core's modules form layers: `model` (and the `error` type it carries) depend on no other
//! module, and no module depends on itself through others. Read from the sources: every
//! `crate::<module>` path outside comments and `#[cfg(test)]` items is a dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments and without the items `#[cfg(test)]` marks.
fn production_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if code == "#[cfg(test)]" {
            // Skip the next item: up to the line that closes its first brace, or its `;`.
            let mut depth = 0i32;
            let mut opened = false;
            for item in lines.by_ref() {
                depth += item.matches('{').count() as i32 - item.matches('}').count() as i32;
                opened |= item.contains('{');
                if (opened && depth <= 0) || (!opened && item.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        let code = code.split(" // ").next().unwrap_or(code);
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Module names a piece of code refers to through `crate::`.
fn references(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let word = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(group.split(',').map(|part| word(part.trim())).filter(|w| !w.is_empty()));
        } else {
            out.insert(word(rest));
        }
    }
    out
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| f.strip_prefix(&src).unwrap().components().next().unwrap().as_os_str().to_string_lossy().into_owned())
        .map(|m| m.trim_end_matches(".rs").to_string())
        .filter(|m| m != "lib")
        .collect();
    let mut g = Graph::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let module = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        // Test-only files: the fixtures module and the engine's test module.
        if module == "lib" || module == "testing" || rel.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let refs = references(&production_code(&fs::read_to_string(f).unwrap()));
        let deps = g.entry(module.clone()).or_default();
        deps.extend(refs.into_iter().filter(|r| *r != module && modules.contains(r)));
    }
    g
}

/// A cycle through `start`, if any (the path, `start` first and last).
fn cycle_from(g: &Graph, start: &str) -> Option<Vec<String>> {
    fn walk(g: &Graph, start: &str, at: &str, path: &mut Vec<String>, seen: &mut BTreeSet<String>) -> bool {
        for next in g.get(at).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(g, start, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(g, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn the_model_depends_on_nothing_but_the_error_type() {
    let g = graph();
    assert_eq!(g["model"].iter().collect::<Vec<_>>(), vec!["error"], "model: {:?}", g["model"]);
    assert!(g["error"].is_empty(), "error: {:?}", g["error"]);
}

#[test]
fn no_module_depends_on_itself() {
    let g = graph();
    assert!(g.len() > 10, "the modules were not found: {g:?}");
    let cycles: Vec<Vec<String>> = g.keys().filter_map(|m| cycle_from(&g, m)).collect();
    assert!(cycles.is_empty(), "module cycles: {cycles:?}");
}

#[test]
fn the_reader_sees_dependencies_and_skips_tests_and_comments() {
    let code = "use crate::{alpha, beta::X};\n// crate::gamma\n#[cfg(test)]\nmod tests {\n    use crate::delta;\n}\nfn f() { crate::epsilon::g(); } // crate::zeta\n";
    let refs = references(&production_code(code));
    assert_eq!(refs.into_iter().collect::<Vec<_>>(), vec!["alpha", "beta", "epsilon"]);
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("a".into());
    assert_eq!(cycle_from(&g, "a"), Some(vec!["a".to_string(), "b".to_string(), "a".to_string()]));
}
