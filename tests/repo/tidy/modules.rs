//! The tree as modules: which file is which module of which crate, a Rust path resolved through
//! them (for ARCHITECTURE.md's names), and the import circles between files. Read as text, with
//! word boundaries, never by substring: `fn parse` does not define `parse_journaled`.

use std::collections::{BTreeMap, BTreeSet};

/// One source file: its path from the repository root and its text.
#[derive(Clone)]
pub struct Source {
    pub shown: String,
    pub text: String,
}

impl Source {
    pub fn new(shown: &str, text: &str) -> Source {
        Source {
            shown: shown.to_owned(),
            text: text.to_owned(),
        }
    }
}

/// The crates' source folders and the names a path may start with for each.
pub const CRATES: &[(&str, &[&str])] = &[
    ("formats/src/", &["formats", "percentes_formats"]),
    ("analyzer/src/", &["analyzer", "percentes_analyzer"]),
    ("response/src/", &["response", "percentes_response"]),
    ("recorder/src/", &["recorder", "percentes_recorder"]),
    ("scenarios/src/", &["scenarios", "percentes_scenarios"]),
    ("study/src/", &["study", "percentes_study"]),
    ("src/", &["percentes"]),
    ("tests/", &["tests"]),
];

/// A module: its crate folder and its path in the crate (`["analysis", "window"]`).
pub type Module = (&'static str, Vec<String>);

/// The module a file is (`analyzer/src/analysis/window.rs` -> analyzer's `analysis::window`).
pub fn module_of(shown: &str) -> Option<Module> {
    let (dir, _) = CRATES.iter().find(|(dir, _)| shown.starts_with(dir))?;
    let inner = shown[dir.len()..].strip_suffix(".rs")?;
    let mut path: Vec<String> = inner.split('/').map(str::to_owned).collect();
    if matches!(
        path.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        path.pop();
    }
    Some((dir, path))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `text` has `word` standing alone (no identifier character either side).
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Whether `text` defines `name` as an item (`fn name`, `struct name`, ...), re-exports it by
/// name (`pub use a::name;`, `pub use a::{b, name};`), or lists it in a table of a macro that
/// defines items (`NAME = ...`, as the pins table does).
pub fn defines_item(text: &str, name: &str) -> bool {
    let kinds = [
        "fn", "struct", "enum", "const", "static", "mod", "trait", "type",
    ];
    if kinds
        .iter()
        .any(|kind| has_word(text, &format!("{kind} {name}")))
    {
        return true;
    }
    let macro_row = text.lines().any(|line| {
        let line = line.trim_start();
        line.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with(" = "))
    });
    macro_row
        || text
            .split("pub use ")
            .skip(1)
            .any(|rest| has_word(rest.split(';').next().unwrap_or(""), name))
}

/// Whether `text` gives a type `name` a member `member`: a method, an associated constant, an
/// enum variant or a field.
fn defines_member(text: &str, member: &str) -> bool {
    if has_word(text, &format!("fn {member}")) || has_word(text, &format!("const {member}")) {
        return true;
    }
    text.lines().any(|line| {
        let line = line.trim_start();
        let line = line.strip_prefix("pub ").unwrap_or(line);
        line.strip_prefix(member).is_some_and(|rest| {
            rest.starts_with([',', '(', ':']) || rest.starts_with(" {") || rest.is_empty()
        })
    })
}

/// Whether `text` has an `impl` block for type `name` (`impl Name`, `impl<T> Name<T>`,
/// `impl Trait for Name`).
fn implements(text: &str, name: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        line.starts_with("impl") && {
            let head = line.split('{').next().unwrap_or("");
            let target = head.rsplit(" for ").next().unwrap_or(head);
            has_word(target, name)
        }
    })
}

/// The tree's modules, by crate folder and path.
pub struct Tree<'a> {
    files: &'a [Source],
    modules: BTreeMap<Module, usize>,
}

impl<'a> Tree<'a> {
    pub fn new(files: &'a [Source]) -> Tree<'a> {
        let modules = files
            .iter()
            .enumerate()
            .filter_map(|(i, f)| module_of(&f.shown).map(|m| (m, i)))
            .collect();
        Tree { files, modules }
    }

    fn text(&self, module: &Module) -> &str {
        &self.files[self.modules[module]].text
    }

    /// Where a path's first segment may start: a crate's root, or any module of that name.
    fn starts(&self, first: &str) -> Vec<Module> {
        let crates: Vec<Module> = CRATES
            .iter()
            .filter(|(_, names)| names.contains(&first))
            .map(|(dir, _)| (*dir, Vec::new()))
            .filter(|m| self.modules.contains_key(m))
            .collect();
        if !crates.is_empty() {
            return crates;
        }
        self.modules
            .keys()
            .filter(|(_, path)| path.last().is_some_and(|s| s == first))
            .cloned()
            .collect()
    }

    /// Whether `segments` names something the tree defines, walked module by module.
    pub fn resolves(&self, segments: &[&str]) -> bool {
        let Some((first, rest)) = segments.split_first() else {
            return false;
        };
        if first.starts_with(char::is_uppercase) {
            return self.member_of_type(None, first, rest);
        }
        if rest.is_empty() {
            return !self.starts(first).is_empty();
        }
        self.starts(first)
            .into_iter()
            .any(|start| self.walk(start, rest))
    }

    fn walk(&self, mut at: Module, segments: &[&str]) -> bool {
        for (i, segment) in segments.iter().enumerate() {
            let last = i + 1 == segments.len();
            let mut child = at.clone();
            child.1.push((*segment).to_owned());
            if self.modules.contains_key(&child) {
                at = child;
                continue;
            }
            let text = self.text(&at);
            if last {
                return defines_item(text, segment);
            }
            if has_word(text, &format!("mod {segment}")) {
                continue; // an inline module: its items are in this file
            }
            return segment.starts_with(char::is_uppercase)
                && defines_item(text, segment)
                && self.member_of_type(Some(at.0), segment, &segments[i + 1..]);
        }
        true
    }

    /// Whether type `name` (in crate folder `krate`, or any) has the member `rest` names.
    fn member_of_type(&self, krate: Option<&str>, name: &str, rest: &[&str]) -> bool {
        let [member] = rest else {
            return rest.is_empty() && self.modules.keys().any(|m| self.defines_here(m, name));
        };
        self.modules.keys().any(|m| {
            krate.is_none_or(|k| m.0 == k) && {
                let text = self.text(m);
                (implements(text, name) || self.defines_here(m, name))
                    && defines_member(text, member)
            }
        })
    }

    fn defines_here(&self, module: &Module, name: &str) -> bool {
        let text = self.text(module);
        ["struct", "enum", "trait", "type"]
            .iter()
            .any(|kind| has_word(text, &format!("{kind} {name}")))
    }

    /// The modules each file's code names, within its own crate (`crate::a::b`, `super::c`),
    /// leaving out a file's own ancestors: a child taking from its parent is how a module tree
    /// is built (the glob rule keeps it explicit), not a circle.
    pub fn imports(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, &i) in &self.modules {
            let name = shown(module);
            let edges = graph.entry(name).or_default();
            let code = super::code_only(super::non_test_code(&self.files[i].text));
            for path in named_paths(&code) {
                let Some(target) = self.resolve_import(module, &path) else {
                    continue;
                };
                let ancestor = target.1.len() <= module.1.len() && module.1.starts_with(&target.1);
                if !ancestor && target != *module {
                    edges.insert(shown(&target));
                }
            }
        }
        graph
    }

    /// The items each file takes from one of its own ancestors (`use super::Shared;` in
    /// `run/pacer.rs` names an item of `run`), as `file: item`, leaving out the ancestor's
    /// declared API (an item it makes `pub`, its face to its callers) and modules (a path through
    /// the parent to a sibling names the sibling). Such an import is a child leaning on its
    /// parent's ground floor, which the parent's own imports of its children turn into a circle
    /// the file graph cannot see (issue 51).
    pub fn parent_items(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (module, &i) in &self.modules {
            let code = super::code_only(super::non_test_code(&self.files[i].text));
            for path in named_paths(&code) {
                let Some(target) = self.resolve_import(module, &path) else {
                    continue;
                };
                let ancestor = target.1.len() < module.1.len() && module.1.starts_with(&target.1);
                // The path's segments past the ancestor's: an item of it, unless none is left.
                let depth = path.iter().filter(|s| *s == "super").count();
                let skipped = if path[0] == "crate" {
                    1 + target.1.len()
                } else {
                    depth
                };
                let Some(item) = path.get(skipped).filter(|_| path.len() == skipped + 1) else {
                    continue;
                };
                if !ancestor || item == "self" || !defines_item(self.text(&target), item) {
                    continue;
                }
                let text = self.text(&target);
                let public = ["struct", "enum", "trait", "type", "fn", "const"]
                    .iter()
                    .any(|kind| has_word(text, &format!("pub {kind} {item}")));
                if !public {
                    out.push(format!("{}: {item}", self.files[i].shown));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The deepest module a `crate::` or `super::` path names, from `from`.
    fn resolve_import(&self, from: &Module, path: &[String]) -> Option<Module> {
        let (head, rest) = path.split_first()?;
        let mut base: Vec<String> = match head.as_str() {
            "crate" => Vec::new(),
            "super" => from.1[..from.1.len().checked_sub(1)?].to_vec(),
            _ => return None,
        };
        let mut rest = rest;
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        (0..=base.len())
            .rev()
            .map(|n| (from.0, base[..n].to_vec()))
            .find(|m| self.modules.contains_key(m))
    }
}

/// A module as a reader finds it: `analyzer/src/analysis/window`.
fn shown(module: &Module) -> String {
    format!("{}{}", module.0, module.1.join("/"))
}

/// The `crate::...` and `super::...` paths of `code`, one per named item (`crate::a::{b, c}`
/// gives `crate::a::b` and `crate::a::c`).
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for head in ["crate::", "super::"] {
        for (at, _) in code.match_indices(head) {
            if code[..at].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let rest = &code[at..];
            let end = rest
                .find(|c: char| !(is_ident(c) || c == ':'))
                .unwrap_or(rest.len());
            let stem: Vec<String> = rest[..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if rest[end..].starts_with('{') {
                let list = rest[end + 1..].split('}').next().unwrap_or("");
                for item in list.split(',') {
                    let mut path = stem.clone();
                    path.extend(
                        item.trim()
                            .split("::")
                            .filter(|s| !s.is_empty() && s.chars().all(is_ident))
                            .map(str::to_owned),
                    );
                    out.push(path);
                }
            } else {
                out.push(stem);
            }
        }
    }
    out
}

/// The strongly connected groups of more than one file in `graph`: each an import circle (or
/// several sharing files), its files sorted.
pub fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reaches = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|k| (k, reaches(k))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (node, from_here) in &reach {
        let group: Vec<String> = from_here
            .iter()
            .filter(|other| reach.get(other).is_some_and(|r| r.contains(*node)))
            .cloned()
            .collect();
        if group.len() > 1 && !out.iter().any(|g| g.contains(node)) {
            out.push(group);
        }
    }
    out.sort();
    out
}
