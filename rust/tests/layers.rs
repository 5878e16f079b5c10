//! The layers of the Rust core, as ARCHITECTURE.md draws them, checked against the imports.
//!
//! ARCHITECTURE.md's section "Layers of the Rust core" holds a table: one row a layer, bottom
//! to top, naming its files (`x.rs`) and directories (`x/`, every file below it unless a longer
//! entry places it). This test reads every `.rs` file under `rust/`, finds the paths that leave
//! the file (`crate::…`, `super::…` and `self::…`, in `use` trees and inline, comments and
//! string literals left out), and fails, naming the file, the line and the path, on:
//!
//! - a file the table does not place, or a table entry that names no file;
//! - a path into a higher layer;
//! - a path that closes a cycle between files of one layer. A module's file and the files of
//!   its own submodules (`x.rs` or `x/mod.rs`, and `x/…`) are one module: they may refer to each
//!   other, as a parent and the children that implement parts of it do.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const SECTION: &str = "## Layers of the Rust core";

/// One file's path that leaves it: where, what, and the file it lands in.
struct Import {
    from: String,
    line: usize,
    path: String,
    to: String,
}

/// The layer table: entries (`x.rs` or `x/`, relative to `rust/`) with their layer's index.
struct Layers {
    names: Vec<String>,
    entries: Vec<(String, usize)>,
}

impl Layers {
    fn parse(markdown: &str) -> Result<Self, String> {
        let section = markdown
            .split_once(SECTION)
            .map(|(_, rest)| rest.split("\n## ").next().unwrap_or_default())
            .ok_or_else(|| format!("ARCHITECTURE.md has no section {SECTION:?}"))?;
        let mut layers = Self {
            names: Vec::new(),
            entries: Vec::new(),
        };
        let rows = section.lines().filter(|l| l.trim_start().starts_with('|'));
        // The header row and the separator row come first.
        for row in rows.skip(2) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let (Some(name), Some(files)) = (cells.get(1), cells.get(2)) else {
                return Err(format!("a layer row without a file column: {row}"));
            };
            let index = layers.names.len();
            layers.names.push((*name).to_owned());
            for entry in files.split('`').skip(1).step_by(2) {
                layers.entries.push((entry.to_owned(), index));
            }
        }
        if layers.names.is_empty() {
            return Err(format!("the section {SECTION:?} has no table rows"));
        }
        Ok(layers)
    }

    /// The layer of `file` (relative to `rust/`): its longest matching entry's.
    fn of(&self, file: &str) -> Option<usize> {
        self.entries
            .iter()
            .filter(|(entry, _)| {
                entry == file || (entry.ends_with('/') && file.starts_with(entry.as_str()))
            })
            .max_by_key(|(entry, _)| entry.len())
            .map(|&(_, layer)| layer)
    }
}

/// `source` with comments, string and character literals blanked out (lines kept).
fn strip(source: &str) -> Vec<char> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    while i < chars.len() {
        match literal_end(&chars, i) {
            Some(end) => {
                let end = end.min(chars.len());
                for c in out[i..end].iter_mut().filter(|c| **c != '\n') {
                    *c = ' ';
                }
                i = end;
            }
            None => i += 1,
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where the comment or literal that starts at `i` ends (`None`: none starts there).
fn literal_end(chars: &[char], i: usize) -> Option<usize> {
    let next = chars.get(i + 1).copied();
    let before = i.checked_sub(1).map(|p| chars[p]);
    match (chars[i], next) {
        ('/', Some('/')) => Some(
            (i..chars.len())
                .find(|&j| chars[j] == '\n')
                .unwrap_or(chars.len()),
        ),
        ('/', Some('*')) => Some(block_comment_end(chars, i)),
        ('r', Some('"' | '#')) if !before.is_some_and(|b| is_ident(b) && b != 'b') => {
            raw_string_end(chars, i)
        }
        ('"', _) => {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            Some(j + 1)
        }
        // A character literal ('a', '\n', '\u{..}'); otherwise a lifetime or a label.
        ('\'', Some('\\')) if !before.is_some_and(is_ident) => (i + 2..chars.len())
            .find(|&j| chars[j] == '\'')
            .map(|j| j + 1),
        ('\'', Some(_)) if !before.is_some_and(is_ident) && chars.get(i + 2) == Some(&'\'') => {
            Some(i + 3)
        }
        _ => None,
    }
}

/// The end of the (nested) block comment that starts at `i`.
fn block_comment_end(chars: &[char], i: usize) -> usize {
    let (mut depth, mut j) = (1, i + 2);
    while j < chars.len() && depth > 0 {
        match (chars[j], chars.get(j + 1)) {
            ('/', Some('*')) => (depth, j) = (depth + 1, j + 2),
            ('*', Some('/')) => (depth, j) = (depth - 1, j + 2),
            _ => j += 1,
        }
    }
    j
}

/// The end of the raw string (`r"…"`, `r#"…"#`) that starts at `i`, if one does.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
    if chars.get(i + 1 + hashes) != Some(&'"') {
        return None;
    }
    let body = i + 2 + hashes;
    let closes = |j: usize| chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#'));
    Some(
        (body..chars.len())
            .find(|&j| closes(j))
            .map_or(chars.len(), |j| j + 1 + hashes),
    )
}

/// The module path of a file relative to `rust/` (`lib.rs`: the crate root).
fn module_of(file: &str) -> Vec<String> {
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    if stem == "lib" {
        return Vec::new();
    }
    stem.split('/').map(str::to_owned).collect()
}

/// The file a module path lands in: its longest prefix that is a file of `files`.
fn file_of(files: &BTreeSet<String>, module: &[String]) -> String {
    for len in (1..=module.len()).rev() {
        let stem = module[..len].join("/");
        for candidate in [format!("{stem}.rs"), format!("{stem}/mod.rs")] {
            if files.contains(&candidate) {
                return candidate;
            }
        }
    }
    "lib.rs".to_owned()
}

/// A cursor over stripped source.
struct Tokens<'a> {
    chars: &'a [char],
    at: usize,
}

impl Tokens<'_> {
    fn skip_space(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, text: &str) -> bool {
        self.skip_space();
        let n = text.chars().count();
        let here = self.chars.get(self.at..self.at + n);
        if here.is_some_and(|h| h.iter().copied().eq(text.chars())) {
            self.at += n;
            return true;
        }
        false
    }

    /// Whether `text` comes next (nothing is consumed).
    fn peek(&mut self, text: &str) -> bool {
        let save = self.at;
        let found = self.eat(text);
        self.at = save;
        found
    }

    fn ident(&mut self) -> Option<String> {
        self.skip_space();
        let start = self.at;
        while self
            .chars
            .get(self.at)
            .is_some_and(|&c| c.is_alphanumeric() || c == '_')
        {
            self.at += 1;
        }
        (self.at > start).then(|| self.chars[start..self.at].iter().collect())
    }

    /// A path or use tree after its first segment: every full path it names.
    fn tree(&mut self, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        loop {
            let save = self.at;
            if !self.eat("::") {
                self.at = save;
                break;
            }
            if self.eat("{") {
                loop {
                    if self.eat("}") {
                        return;
                    }
                    match self.ident() {
                        Some(first) => {
                            let mut inner = path.clone();
                            inner.push(first);
                            self.tree(inner, out);
                        }
                        None if self.eat("*") => out.push(path.clone()),
                        None => {}
                    }
                    if self.eat("as") {
                        self.ident();
                    }
                    if !self.eat(",") && !self.eat("}") {
                        return;
                    }
                    if self.chars.get(self.at - 1) == Some(&'}') {
                        return;
                    }
                }
            }
            if self.eat("*") {
                break;
            }
            match self.ident() {
                Some(segment) => path.push(segment),
                None => break,
            }
        }
        out.push(path);
    }
}

/// The paths in `source` (the file `file`) that leave it.
fn imports(file: &str, source: &str, files: &BTreeSet<String>) -> Vec<Import> {
    let chars = strip(source);
    let mut scope = Scope {
        file,
        inline: Vec::new(),
        depth: 0,
    };
    let mut found = Vec::new();
    let mut tokens = Tokens {
        chars: &chars,
        at: 0,
    };
    while tokens.at < chars.len() {
        let c = chars[tokens.at];
        let starts_word = tokens
            .at
            .checked_sub(1)
            .is_none_or(|p| !is_ident(chars[p]) && chars[p] != '$');
        scope.brace(c);
        if !(starts_word && (c.is_alphabetic() || c == '_')) {
            tokens.at += 1;
            continue;
        }
        let start = tokens.at;
        let word = tokens.ident().unwrap_or_default();
        if word == "mod" {
            scope.open_inline(&mut tokens);
        } else if matches!(word.as_str(), "crate" | "super" | "self") && tokens.peek("::") {
            let mut paths = Vec::new();
            tokens.tree(vec![word], &mut paths);
            let line = chars[..start].iter().filter(|&&c| c == '\n').count() + 1;
            found.extend(scope.resolve_all(paths, line, files));
        }
    }
    found
}

/// Where the scan of a file stands: its inline modules (`mod tests { .. }`), each with the
/// brace depth it opened at.
struct Scope<'f> {
    file: &'f str,
    inline: Vec<(String, usize)>,
    depth: usize,
}

impl Scope<'_> {
    fn brace(&mut self, c: char) {
        if c == '{' {
            self.depth += 1;
        } else if c == '}' {
            self.depth = self.depth.saturating_sub(1);
            if self.inline.last().is_some_and(|&(_, d)| d == self.depth) {
                self.inline.pop();
            }
        }
    }

    /// After `mod`: enters the module when it is inline (its brace is left to `brace`).
    fn open_inline(&mut self, tokens: &mut Tokens<'_>) {
        let Some(name) = tokens.ident() else {
            return;
        };
        if tokens.peek("{") {
            self.inline.push((name, self.depth));
        }
    }

    /// The imports of `paths`, found at `line`, that land in another file.
    fn resolve_all(
        &self,
        paths: Vec<Vec<String>>,
        line: usize,
        files: &BTreeSet<String>,
    ) -> Vec<Import> {
        let mut module = module_of(self.file);
        module.extend(self.inline.iter().map(|(name, _)| name.clone()));
        paths
            .into_iter()
            .filter_map(|path| {
                let to = file_of(files, &resolve(&module, &path)?);
                (to != self.file).then(|| Import {
                    from: self.file.to_owned(),
                    line,
                    path: path.join("::"),
                    to,
                })
            })
            .collect()
    }
}

/// The crate-absolute module path `path` names from inside `module`.
fn resolve(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut segments = path.iter().peekable();
    let mut base: Vec<String> = match segments.next().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("self") => module.to_vec(),
        Some("super") => module.get(..module.len().checked_sub(1)?)?.to_vec(),
        _ => return None,
    };
    while segments.peek().is_some_and(|s| *s == "super") {
        segments.next();
        base.pop()?;
    }
    base.extend(segments.filter(|s| *s != "self").cloned());
    Some(base)
}

/// Whether one file's module contains the other's (`x.rs` and `x/y.rs`).
fn nested(a: &str, b: &str) -> bool {
    let (a, b) = (module_of(a), module_of(b));
    a.starts_with(&b) || b.starts_with(&a)
}

/// Every breach of the layering by the files `sources` (path relative to `rust/` → text).
fn check(table: &str, sources: &BTreeMap<String, String>) -> Vec<String> {
    let layers = match Layers::parse(table) {
        Ok(layers) => layers,
        Err(e) => return vec![e],
    };
    let files: BTreeSet<String> = sources.keys().cloned().collect();
    let all: Vec<Import> = sources
        .iter()
        .flat_map(|(file, source)| imports(file, source, &files))
        .collect();
    let mut errors = placement_errors(&layers, &files);
    errors.extend(upward_errors(&layers, &all));
    errors.extend(cycle_errors(&layers, &all));
    errors
}

/// Table entries that name no file, and files that no entry places.
fn placement_errors(layers: &Layers, files: &BTreeSet<String>) -> Vec<String> {
    let mut errors = Vec::new();
    for (entry, _) in &layers.entries {
        let names =
            |f: &String| f == entry || (entry.ends_with('/') && f.starts_with(entry.as_str()));
        if !files.iter().any(names) {
            errors.push(format!(
                "ARCHITECTURE.md: the layer table names `{entry}`, which is no file or directory of rust/"
            ));
        }
    }
    for file in files.iter().filter(|f| layers.of(f).is_none()) {
        errors.push(format!(
            "rust/{file}: not placed in ARCHITECTURE.md's layer table"
        ));
    }
    errors
}

fn upward_errors(layers: &Layers, all: &[Import]) -> Vec<String> {
    all.iter()
        .filter_map(|import| {
            let (from, to) = (layers.of(&import.from)?, layers.of(&import.to)?);
            (to > from).then(|| {
                format!(
                    "rust/{}:{}: `{}` goes up from layer {} to layer {} (rust/{})",
                    import.from,
                    import.line,
                    import.path,
                    layers.names[from],
                    layers.names[to],
                    import.to
                )
            })
        })
        .collect()
}

/// Imports within one layer, between files that are not one module, that some chain of such
/// imports leads back from.
fn cycle_errors(layers: &Layers, all: &[Import]) -> Vec<String> {
    let within = |import: &&Import| {
        layers.of(&import.from).is_some()
            && layers.of(&import.from) == layers.of(&import.to)
            && !nested(&import.from, &import.to)
    };
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for import in all.iter().filter(within) {
        edges.entry(&import.from).or_default().insert(&import.to);
    }
    let reaches = |start: &str, goal: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(node) = stack.pop() {
            if node == goal {
                return true;
            }
            if seen.insert(node) {
                stack.extend(edges.get(node).into_iter().flatten().copied());
            }
        }
        false
    };
    all.iter()
        .filter(within)
        .filter(|import| reaches(&import.to, &import.from))
        .map(|import| {
            let layer = layers
                .of(&import.from)
                .map_or("?", |l| layers.names[l].as_str());
            format!(
                "rust/{}:{}: `{}` closes a cycle in layer {layer}: rust/{} leads back to rust/{}",
                import.from, import.line, import.path, import.to, import.from
            )
        })
        .collect()
}

fn read_tree(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    let entries = std::fs::read_dir(dir).expect("read a directory of rust/");
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            read_tree(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(root).expect("under rust/");
            let name = relative.to_string_lossy().replace('\\', "/");
            out.insert(
                name,
                std::fs::read_to_string(&path).expect("read a .rs file"),
            );
        }
    }
}

#[test]
fn every_import_looks_down_the_layers_of_architecture_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let table = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut sources = BTreeMap::new();
    read_tree(&root.join("rust"), &root.join("rust"), &mut sources);
    let errors = check(&table, &sources);
    assert!(
        errors.is_empty(),
        "the imports break the layers:\n{}",
        errors.join("\n")
    );
}

#[cfg(test)]
mod checker {
    //! The checker on small trees: it must see what it is there to see.

    use super::*;

    const TABLE: &str = "## Layers of the Rust core\n\n| layer | files |\n|---|---|\n\
        | Low | `low.rs`, `low/` |\n| Mid | `mid.rs`, `other.rs` |\n| Top | `lib.rs` |\n";

    fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(f, s)| ((*f).to_owned(), (*s).to_owned()))
            .collect()
    }

    #[test]
    fn an_upward_import_is_named_with_its_line() {
        let sources = tree(&[
            ("lib.rs", "mod low;\nmod mid;\nmod other;\n"),
            (
                "low.rs",
                "mod x;\n// crate::mid in a comment\n\nuse crate::{low::x, mid::{Thing, Other}};\n",
            ),
            (
                "low/x.rs",
                "fn f() { let s = \"crate::mid::y\"; super::g(); }\n",
            ),
            ("mid.rs", "use crate::low::x;\n"),
            ("other.rs", ""),
        ]);
        let errors = check(TABLE, &sources);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with(
                "rust/low.rs:4: `crate::mid::Thing` goes up from layer Low to layer Mid"
            ),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with("rust/low.rs:4: `crate::mid::Other` goes up"),
            "{errors:?}"
        );
    }

    #[test]
    fn a_cycle_within_a_layer_and_an_unplaced_file_fail() {
        let sources = tree(&[
            ("lib.rs", ""),
            ("low.rs", ""),
            ("mid.rs", "fn f() -> crate::other::T { todo!() }\n"),
            (
                "other.rs",
                "#[cfg(test)]\nmod tests {\n    use super::*;\n}\nuse crate::mid::f;\n",
            ),
            ("stray.rs", "use crate::low::y;\n"),
        ]);
        let errors = check(TABLE, &sources);
        assert!(
            errors
                .iter()
                .any(|e| e == "rust/stray.rs: not placed in ARCHITECTURE.md's layer table"),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("rust/mid.rs:1: `crate::other::T` closes a cycle")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("rust/other.rs:5: `crate::mid::f` closes a cycle")),
            "{errors:?}"
        );
    }

    #[test]
    fn a_module_and_its_submodules_may_use_each_other() {
        let sources = tree(&[
            ("lib.rs", ""),
            ("low.rs", "mod x;\nuse self::x::Y;\n"),
            (
                "low/x.rs",
                "use super::Z;\npub struct Y<'a>(&'a str, char);\nfn c() -> char { '{' }\n",
            ),
            ("mid.rs", ""),
            ("other.rs", ""),
        ]);
        assert_eq!(check(TABLE, &sources), Vec::<String>::new());
    }
}
