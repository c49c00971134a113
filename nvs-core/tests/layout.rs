//! Every crate of the workspace stays layered: no import cycle between a crate's
//! top-level modules (nvs-core's media, format, index, log, delta, recover, retention,
//! pool, ...), and none between its files except a module's own file and its children
//! (an `impl` spread over rooms). A crate's root (`lib.rs`, `main.rs`) is the parent of
//! every module of its tree; a package with both a library and a binary has two trees.
//! Imports are read from the sources: `crate::a::b`, `super::` and `self::` paths (a
//! path inside an inline `mod x { .. }` starts from `x`), outside comments and test
//! modules. The crates are the members of the workspace's Cargo.toml that have a `src/`.
#![cfg(not(miri))] // reads the source tree

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;
type Graph = BTreeMap<Module, BTreeSet<Module>>;

/// The crates that must be found, with the least number of files and of distinct
/// imports between them each must show: floors that keep the check from passing by
/// reading nothing. Members not listed here are checked too (at least one file).
const EXPECTED: [(&str, usize, usize); 8] = [
    ("nvs-core", 30, 140),
    ("nvs-std", 8, 12),
    ("nvs-cli", 10, 20),
    ("nvs-c", 4, 3),
    ("nvs-sim", 3, 2),
    ("nvs-verify", 10, 15),
    ("nvs-bench", 9, 10),
    ("nvs-fuzz-check", 3, 2),
];

/// The code of a file without comments and its test module.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The identifier at the start of `s` (after blanks), and the text after it.
fn ident(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let n = s.bytes().take_while(|b| is_ident(*b)).count();
    s.split_at(n)
}

/// Every `mod name` in `code` (the word `mod` on its own), with what follows the name:
/// `;` for a file, `{` for an inline module.
fn mod_items(code: &str) -> Vec<(usize, String, char)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = code[at..].find("mod") {
        let i = at + i;
        at = i + 3;
        if i > 0 && is_ident(bytes[i - 1]) || bytes.get(i + 3).is_none_or(|b| is_ident(*b)) {
            continue;
        }
        let (name, rest) = ident(&code[i + 3..]);
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        if let Some(c @ (';' | '{')) = rest.trim_start().chars().next() {
            out.push((i, name.to_string(), c));
        }
    }
    out
}

/// The inline modules of `code`: (start, end, name) of each `mod name { .. }` body.
fn inline_mods(code: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    for (i, name, c) in mod_items(code) {
        if c != '{' {
            continue;
        }
        let open = i + code[i..].find('{').unwrap_or(0);
        let mut depth = 0usize;
        let end = code[open..]
            .char_indices()
            .find_map(|(k, ch)| {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => return None,
                }
                (depth == 0).then_some(open + k)
            })
            .unwrap_or(code.len());
        out.push((open, end, name));
    }
    out
}

/// The paths of `s` (the text after a `crate::`, `super::` or `self::`) under `base`, a
/// use-group `{a, b::{c, d}}` expanded into one path per item.
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

/// Every `crate::x::y`, `super::x` or `self::x` path in `code` (use-groups expanded), as
/// module paths from the root. `me` is the file's module; a path inside an inline module
/// starts from it, and `super::super::` climbs twice.
fn paths(me: &Module, code: &str) -> Vec<Module> {
    let inline = inline_mods(code);
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(start) {
            let i = at + i;
            at = i + start.len();
            if i > 0 && (is_ident(bytes[i - 1]) || bytes[i - 1] == b':') {
                continue; // part of a longer path (`a::super::`, `super::super::`)
            }
            let mut here = me.clone();
            here.extend(inline.iter().filter(|(s, e, _)| (*s..*e).contains(&i)).map(|(_, _, n)| n.clone()));
            let mut rest = &code[i + start.len()..];
            let base: Module = match start {
                "crate::" => Vec::new(),
                "self::" => here,
                _ => {
                    here.pop(); // the parent module
                    while let Some(r) = rest.trim_start().strip_prefix("super::") {
                        here.pop();
                        rest = r;
                    }
                    here
                }
            };
            expand(base, rest, &mut out);
        }
    }
    out
}

/// The circles of `graph`: its strongly connected components of more than one module,
/// each with one cycle through them (from its first module, along its first edges).
fn circles(graph: &Graph) -> Vec<(BTreeSet<Module>, Vec<Module>)> {
    // Kosaraju: modules by finishing time, then the reversed graph in reverse order.
    fn finish(u: &Module, g: &Graph, seen: &mut BTreeSet<Module>, order: &mut Vec<Module>) {
        if seen.insert(u.clone()) {
            for v in g.get(u).into_iter().flatten() {
                finish(v, g, seen, order);
            }
            order.push(u.clone());
        }
    }
    let (mut seen, mut order) = (BTreeSet::new(), Vec::new());
    for u in graph.keys() {
        finish(u, graph, &mut seen, &mut order);
    }
    let mut reversed = Graph::new();
    for (u, vs) in graph {
        for v in vs {
            reversed.entry(v.clone()).or_default().insert(u.clone());
        }
    }
    let (mut seen, mut out) = (BTreeSet::new(), Vec::new());
    for u in order.iter().rev() {
        let mut scc = Vec::new();
        finish(u, &reversed, &mut seen, &mut scc);
        if scc.len() < 2 {
            continue;
        }
        let scc: BTreeSet<Module> = scc.into_iter().collect();
        let first = scc.first().cloned().unwrap_or_default();
        let mut cycle = vec![first.clone()];
        while cycle.len() == 1 || cycle.last() != Some(&first) {
            let last = cycle.last().cloned().unwrap_or_default();
            // The next module of the component on the way back to `first`: `first` itself
            // when `last` imports it, else one not yet on the path (it exists: from each
            // module of a component every other is reachable inside it).
            let next = graph[&last]
                .iter()
                .filter(|v| scc.contains(*v))
                .find(|v| **v == first)
                .or_else(|| graph[&last].iter().find(|v| scc.contains(*v) && !cycle.contains(v)))
                .cloned();
            match next {
                Some(n) => cycle.push(n),
                None => break, // a dead end of this greedy walk: the component says it all
            }
        }
        out.push((scc, cycle));
    }
    out
}

/// The files of the module tree rooted at `root` (`lib.rs`, `main.rs`), found through
/// its `mod name;` items, by module path.
fn tree(src: &Path, root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut files = BTreeMap::new();
    let mut todo = vec![(Module::new(), root.to_path_buf())];
    while let Some((m, f)) = todo.pop() {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("read {}: {e}", f.display()));
        // A root's and a `mod.rs`'s children sit beside it; `a.rs`'s in `a/`.
        let dir = if m.is_empty() || f.file_name().is_some_and(|n| n == "mod.rs") {
            f.parent().unwrap_or(src).to_path_buf()
        } else {
            f.with_extension("")
        };
        for (_, name, c) in mod_items(&code(&text)) {
            if c != ';' {
                continue;
            }
            let (flat, nested) = (dir.join(format!("{name}.rs")), dir.join(&name).join("mod.rs"));
            let child = if flat.is_file() { flat } else { nested };
            assert!(child.is_file(), "{}: `mod {name};` has no file", f.display());
            let mut cm = m.clone();
            cm.push(name);
            todo.push((cm, child));
        }
        files.insert(m, f);
    }
    files
}

fn rs_files(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let p = e.expect("entry").path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.insert(p);
        }
    }
}

/// What one module tree shows: how many distinct imports between its files, and the
/// cycles found (empty when layered).
fn check_tree(krate: &str, files: &BTreeMap<Module, PathBuf>) -> (usize, Vec<String>) {
    let modules: BTreeSet<&Module> = files.keys().collect();
    let (mut imports, mut file_graph, mut top_graph) = (BTreeSet::new(), Graph::new(), Graph::new());
    for (me, f) in files {
        let text = std::fs::read_to_string(f).expect("read");
        for p in paths(me, &code(&text)) {
            // The longest prefix of the path that is a module (a file) of the tree.
            let Some(target) = (0..=p.len()).rev().map(|k| p[..k].to_vec()).find(|m| modules.contains(m)) else {
                continue;
            };
            if &target == me {
                continue;
            }
            imports.insert((me.clone(), target.clone()));
            if target.is_empty() {
                continue; // the root: the parent of every module
            }
            let parent_child = target.starts_with(me) || me.starts_with(&target);
            if !parent_child {
                file_graph.entry(me.clone()).or_insert_with(BTreeSet::new).insert(target.clone());
            }
            if !me.is_empty() && me[0] != target[0] {
                top_graph.entry(vec![me[0].clone()]).or_insert_with(BTreeSet::new).insert(vec![target[0].clone()]);
            }
        }
    }
    let at = |m: &Module| match (files.get(m), files.get(&Vec::new()).and_then(|r| r.parent())) {
        (Some(f), Some(src)) => f.strip_prefix(src).unwrap_or(f).display().to_string(),
        _ => m.join("::"),
    };
    let (mut cycles, mut told) = (Vec::new(), BTreeSet::new());
    for (what, graph) in [("top-level modules", &top_graph), ("files", &file_graph)] {
        for (scc, cycle) in circles(graph) {
            if !told.insert(scc.clone()) {
                continue; // top-level modules that are files: told once
            }
            let line = format!(
                "{krate}: an import cycle between {what} {{{}}}: {}",
                scc.iter().map(at).collect::<Vec<_>>().join(", "),
                cycle.iter().map(at).collect::<Vec<_>>().join(" -> ")
            );
            cycles.push(line);
        }
    }
    (imports.len(), cycles)
}

/// The members of the workspace (`members = [...]` in its Cargo.toml).
fn members(workspace: &Path) -> Vec<String> {
    let toml = std::fs::read_to_string(workspace.join("Cargo.toml")).expect("workspace Cargo.toml");
    let list = toml.split("members").nth(1).and_then(|s| s.split(']').next()).expect("members = [...]");
    list.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

#[test]
fn no_import_cycles() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let members = members(&workspace);
    for (krate, _, _) in EXPECTED {
        assert!(members.iter().any(|m| m == krate), "{krate} is a member of the workspace: {members:?}");
    }
    let (mut report, mut checked) = (String::new(), Vec::new());
    for krate in &members {
        let src = workspace.join(krate).join("src");
        if !src.is_dir() {
            continue;
        }
        let mut roots: Vec<PathBuf> =
            ["lib.rs", "main.rs"].iter().map(|r| src.join(r)).filter(|r| r.is_file()).collect();
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            roots.extend(
                bins.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "rs")),
            );
        }
        assert!(!roots.is_empty(), "{krate}: no lib.rs or main.rs in {}", src.display());
        let (mut found, mut files, mut imports) = (BTreeSet::new(), 0, 0);
        for root in &roots {
            let t = tree(&src, root);
            files += t.len();
            found.extend(t.values().cloned());
            let (n, cycles) = check_tree(krate, &t);
            imports += n;
            report.extend(cycles.into_iter().map(|c| c + "\n"));
        }
        // Every file is in a tree: a `mod` item the reader missed would hide its imports.
        let mut all = BTreeSet::new();
        rs_files(&src, &mut all);
        let missed: Vec<_> = all.difference(&found).collect();
        assert!(missed.is_empty(), "{krate}: files in no module tree (a `mod` item not read?): {missed:?}");
        let (min_files, min_imports) =
            EXPECTED.iter().find(|(k, _, _)| k == krate).map_or((1, 0), |(_, f, i)| (*f, *i));
        assert!(files >= min_files, "{krate}: found {files} files, expected {min_files} or more");
        assert!(imports >= min_imports, "{krate}: found {imports} imports, expected {min_imports} or more");
        checked.push(format!("{krate}: {files} files, {imports} imports"));
    }
    eprintln!("{}", checked.join("\n"));
    assert!(report.is_empty(), "import cycles:\n{report}");
}
