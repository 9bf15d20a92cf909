//! The import graphs of the library and of the `tilemaxsim` binary have no cycle: every
//! `super::…` and `crate::…` path in a source file (outside its `mod tests`) is resolved to the
//! file of the module it names, and the file-to-file graph is checked for cycles. This is how
//! the layout's rule "edges run one way" (scorer → launch, topk, memory → device; commands →
//! shared helpers) is kept.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("source folder") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module a file defines, as a path of names from the crate root (`cuda/launch/mod.rs` →
/// `cuda::launch`; `lib.rs`/`main.rs` → the root, empty).
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).expect("under the root");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The longest prefix of `path` that is a module of the crate.
fn resolve(modules: &BTreeSet<Vec<String>>, path: &[String]) -> Option<Vec<String>> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
}

/// The paths after `super::` and `crate::` in `text` (group imports `{a, b::c}` expanded, one
/// level deep), each with the module it starts from: `Some(parent)` for super, `None` for crate.
fn paths(text: &str) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    for (kw, is_super) in [("super::", true), ("crate::", false)] {
        let mut rest = text;
        while let Some(at) = rest.find(kw) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + kw.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // part of a longer word
            }
            let mut segs = Vec::new();
            let mut tail = rest;
            loop {
                let name: String = tail
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() {
                    break;
                }
                tail = &tail[name.len()..];
                segs.push(name);
                match tail.strip_prefix("::") {
                    Some(t) => tail = t,
                    None => break,
                }
            }
            if let Some(group) = tail.strip_prefix('{') {
                let inner = &group[..group.find('}').unwrap_or(0)];
                for item in inner.split(',') {
                    let first: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !first.is_empty() && first != "self" {
                        let mut p = segs.clone();
                        p.push(first);
                        out.push((is_super, p));
                    }
                }
            } else if !segs.is_empty() {
                out.push((is_super, segs));
            }
        }
    }
    out
}

/// The module-to-module import edges of the crate whose source root is `root`.
fn graph(root: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    sources(root, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(root, f)).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for f in &files {
        let me = module_of(root, f);
        let text = std::fs::read_to_string(f).expect("source");
        // Unit tests import their own module through `super`: not an edge of the layout.
        let code = text.split("mod tests {").next().unwrap_or("");
        let parent: Vec<String> = me[..me.len().saturating_sub(1)].to_vec();
        for (is_super, p) in paths(code) {
            let full: Vec<String> = if is_super {
                parent.iter().cloned().chain(p).collect()
            } else {
                p
            };
            if let Some(target) = resolve(&modules, &full)
                && target != me
                && !me.starts_with(&target)
                && !target.is_empty()
            {
                edges.entry(me.clone()).or_default().insert(target);
            }
        }
    }
    edges
}

/// A cycle of `edges`, if there is one.
fn cycle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    fn visit(
        n: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let at = stack.iter().position(|s| s == n).unwrap_or(0);
                let mut c: Vec<String> = stack[at..].iter().map(|m| m.join("::")).collect();
                c.push(n.join("::"));
                return Some(c);
            }
            _ => {}
        }
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

fn check(root: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let edges = graph(root);
    if let Some(c) = cycle(&edges) {
        panic!("import cycle under {}: {}", root.display(), c.join(" → "));
    }
    edges
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_library_imports_run_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = check(&root);
    // The GPU engine's layers: the scorer chooses and sequences; below it nothing names it
    // but the searchers (exact, compressed, IVF over residual codes and where it holds them, the
    // exact second stage), which search with it.
    let scorer = names(&["cuda", "scorer"]);
    for (from, to) in &edges {
        if to.contains(&scorer) {
            assert!(
                from == &names(&["cuda", "index"])
                    || from == &names(&["cuda", "codes_index"])
                    || from == &names(&["cuda", "ivf"])
                    || from == &names(&["cuda", "ivf_codes"])
                    || from == &names(&["cuda", "rerank"])
                    || !from.starts_with(&names(&["cuda"])),
                "{} imports the scorer",
                from.join("::")
            );
        }
    }
    let context = edges
        .get(&names(&["cuda", "context"]))
        .cloned()
        .unwrap_or_default();
    for below in [
        ["cuda", "launch"],
        ["cuda", "memory"],
        ["cuda", "topk"],
        ["cuda", "scorer"],
    ] {
        assert!(
            !context.contains(&names(&below)),
            "the context imports {below:?}"
        );
    }
    // The checker sees real edges (a broken scan would find none and pass).
    assert!(
        edges[&scorer].contains(&names(&["cuda", "launch"])),
        "{edges:?}"
    );
}

#[test]
fn the_command_imports_run_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tilemaxsim-cli/src");
    let edges = check(&root);
    assert!(
        edges[&names(&["commands", "search"])].contains(&names(&["args"])),
        "{edges:?}"
    );
}
