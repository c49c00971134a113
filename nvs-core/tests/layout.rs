//! The layout stays layered: no import cycle between nvs-core's top-level modules
//! (media, format, index, log, delta, recover, retention, pool, ...), and none between
//! its files except a module's own file and its children (an `impl` spread over rooms).
//! Imports are read from the sources: `crate::a::b` and `super::` paths, outside
//! comments and test modules.
#![cfg(not(miri))] // reads the source tree

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/log/plan.rs` -> [log, plan]; `src/log/mod.rs` -> [log]; `src/lib.rs` -> [].
fn module_of(src: &Path, f: &Path) -> Module {
    let rel = f.strip_prefix(src).expect("under src").with_extension("");
    let mut m: Module = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib")) {
        m.pop();
    }
    m
}

/// The code of a file without comments and its test module.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The paths of `s` (the text after a `crate::` or `super::`) under `base`, a use-group
/// `{a, b::{c, d}}` expanded into one path per item.
fn expand(base: Module, s: &str, out: &mut Vec<Module>) {
    let s = s.trim_start();
    let tail: String = s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
    let mut p = base;
    p.extend(tail.split("::").filter(|s| !s.is_empty()).map(str::to_string));
    let Some(group) =
        s[tail.len()..].trim_start().strip_prefix('{').filter(|_| tail.is_empty() || tail.ends_with("::"))
    else {
        return out.push(p);
    };
    let (mut depth, mut start) = (0, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            '}' | ',' if depth == 0 => {
                expand(p.clone(), &group[start..i], out);
                if c == '}' {
                    return;
                }
                start = i + 1;
            }
            _ => {}
        }
    }
}

/// Every `crate::x::y` or `super::x` path in `code` (use-groups expanded), as module
/// paths from the root.
fn paths(me: &Module, code: &str) -> Vec<Module> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(start) {
            let i = at + i;
            at = i + start.len();
            if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
                continue;
            }
            let base: Module = if start == "crate::" {
                Vec::new()
            } else {
                me[..me.len().saturating_sub(1)].to_vec() // the parent module
            };
            expand(base, &code[i + start.len()..], &mut out);
        }
    }
    out
}

fn has_cycle(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn dfs(
        u: &Module,
        g: &BTreeMap<Module, BTreeSet<Module>>,
        state: &mut BTreeMap<Module, u8>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        state.insert(u.clone(), 1);
        stack.push(u.clone());
        for v in g.get(u).into_iter().flatten() {
            match state.get(v) {
                Some(1) => {
                    let from = stack.iter().position(|x| x == v).unwrap_or(0);
                    return Some(stack[from..].iter().cloned().chain([v.clone()]).collect());
                }
                None => {
                    if let Some(c) = dfs(v, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(u.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for u in graph.keys() {
        if !state.contains_key(u) {
            if let Some(c) = dfs(u, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Modules that import nothing but each other (see `no_import_cycles`).
const LEAVES: [&[&str]; 2] = [&["format", "hash"], &["format", "sum"]];

#[test]
fn no_import_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let modules: BTreeSet<Module> = all.iter().map(|f| module_of(&src, f)).collect();
    assert!(modules.len() > 20, "found the sources: {modules:?}");
    let (mut file_graph, mut top_graph) = (BTreeMap::new(), BTreeMap::new());
    for f in &all {
        let me = module_of(&src, f);
        let text = std::fs::read_to_string(f).expect("read");
        for p in paths(&me, &code(&text)) {
            // The longest prefix of the path that is a module (a file) of the crate.
            let Some(target) = (0..=p.len()).rev().map(|k| p[..k].to_vec()).find(|m| modules.contains(m)) else {
                continue;
            };
            if target.is_empty() || target == me {
                continue;
            }
            // The checksums (`format::hash`, `format::sum`) are leaves: they import
            // nothing but each other, so the media seam may name `Sum` (its summed
            // stores and reads) without layering media above the format.
            let is_leaf = |m: &Module| LEAVES.iter().any(|l| m.iter().map(String::as_str).eq(l.iter().copied()));
            if is_leaf(&me) {
                assert!(is_leaf(&target), "{me:?} is a checksum leaf but imports {target:?}");
            }
            if is_leaf(&target) && me.first().is_some_and(|m| m == "media") {
                continue;
            }
            let parent_child = target.starts_with(&me) || me.starts_with(&target);
            if !parent_child {
                file_graph.entry(me.clone()).or_insert_with(BTreeSet::new).insert(target.clone());
            }
            if !me.is_empty() && me[0] != target[0] {
                top_graph.entry(vec![me[0].clone()]).or_insert_with(BTreeSet::new).insert(vec![target[0].clone()]);
            }
        }
    }
    assert!(top_graph.len() > 5, "found imports: {top_graph:?}");
    assert_eq!(has_cycle(&top_graph), None, "an import cycle between top-level modules");
    assert_eq!(has_cycle(&file_graph), None, "an import cycle between files");
}
