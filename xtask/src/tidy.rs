//! `cargo xtask tidy`: checks that keep the code's shape, run by `cargo xtask test`.
//!
//! - No cycle between core's top-level modules, and none between the child modules of one
//!   module unless that module's root explains it in a `//!` line starting `Cycle:` that names
//!   the modules. Upstream's Go packages cannot form cycles; ours could, unseen. Test code
//!   (`#[cfg(test)]` items and modules) is left out, as Go's external `_test` packages are.
//! - A `//!` doc at the top of every Rust source file in the repository.
//! - No reference to a document outside the repository: a relative Markdown link must name a
//!   file that exists, and the notes kept beside the checkout are not cited by name.
//!
//! `--report` prints core's module graph (top level, and inside each module) and its count of
//! public modules and items: the figures `docs/architecture.md` quotes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use syn::visit::Visit;

#[derive(clap::Args)]
pub struct TidyArgs {
    /// Also print core's module graph and its number of public modules and items.
    #[arg(long)]
    pub report: bool,
    /// Check this checkout instead of the one xtask was built from (to compare commits: a
    /// `git worktree` of the older one).
    #[arg(long)]
    pub root: Option<PathBuf>,
}

pub fn run(args: TidyArgs) -> Result<()> {
    let root = args.root.clone().unwrap_or_else(crate::workspace_root);
    let tree = ModuleTree::load(&root)?;
    let graph = tree.graph();
    let mut problems = Vec::new();
    problems.extend(graph.cycle_problems(&tree));
    let files = tracked_files(&root)?;
    problems.extend(missing_file_docs(&root, &files)?);
    problems.extend(outside_references(&root, &files)?);
    if args.report {
        print!("{}", graph.render());
        let (modules, items) = tree.public_counts();
        println!("core's public API: {modules} public modules, {items} public items");
    }
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("tidy: {p}");
        }
        bail!("tidy: {} problem(s)", problems.len());
    }
    eprintln!("tidy: core's module graph has no cycle; every source file has its //! doc; no outside references");
    Ok(())
}

/// A module of core: where its items are, what it defines and imports.
struct Module {
    file: PathBuf,
    /// Reachable from outside the crate: it and every ancestor are `pub mod`.
    public: bool,
    /// Under `#[cfg(test)]` (it or an ancestor).
    test: bool,
    /// Its `//!` lines.
    docs: Vec<String>,
    items: Vec<syn::Item>,
    /// Names of the items it defines (not counting imports).
    defines: BTreeSet<String>,
    /// Names it imports, with the absolute path each stands for (resolved after loading).
    imports: BTreeMap<String, Vec<String>>,
    /// Modules it glob-imports from (absolute).
    globs: Vec<Vec<String>>,
    /// Raw `use` leaves, resolved to `imports`/`globs` once every module is known.
    raw_uses: Vec<(Option<String>, Vec<String>)>,
}

struct ModuleTree {
    root: PathBuf,
    modules: BTreeMap<Vec<String>, Module>,
}

impl ModuleTree {
    fn load(root: &Path) -> Result<Self> {
        let lib = root.join("core/src/lib.rs");
        let lib = lib.as_path();
        let mut tree = ModuleTree { root: root.to_path_buf(), modules: BTreeMap::new() };
        let file = parse(lib)?;
        let dir = lib.parent().context("lib.rs has a directory")?.to_path_buf();
        tree.add(Vec::new(), lib.to_path_buf(), dir, true, false, &file.attrs, file.items)?;
        let paths: Vec<Vec<String>> = tree.modules.keys().cloned().collect();
        for path in paths {
            let raw = std::mem::take(&mut tree.modules.get_mut(&path).expect("listed").raw_uses);
            let mut imports = BTreeMap::new();
            let mut globs = Vec::new();
            for (name, segments) in raw {
                let Some(absolute) = tree.absolute(&path, &segments) else { continue };
                match name {
                    Some(name) => {
                        imports.insert(name, absolute);
                    }
                    None => globs.push(absolute),
                }
            }
            let module = tree.modules.get_mut(&path).expect("listed");
            module.imports = imports;
            module.globs = globs;
        }
        Ok(tree)
    }

    /// Adds a module and, recursively, the modules it declares. `dir` is where its child
    /// modules' files are.
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        path: Vec<String>,
        file: PathBuf,
        dir: PathBuf,
        public: bool,
        test: bool,
        attrs: &[syn::Attribute],
        items: Vec<syn::Item>,
    ) -> Result<()> {
        let mut defines = BTreeSet::new();
        let mut raw_uses = Vec::new();
        let mut children = Vec::new();
        for item in &items {
            if let Some(name) = defined_name(item) {
                defines.insert(name);
            }
            match item {
                syn::Item::Use(u) => use_leaves(&u.tree, &mut Vec::new(), &mut raw_uses),
                syn::Item::Mod(m) => children.push(m.clone()),
                _ => {}
            }
        }
        for m in children {
            let name = m.ident.to_string();
            let child_path = [path.clone(), vec![name.clone()]].concat();
            let child_public = public && matches!(m.vis, syn::Visibility::Public(_));
            let child_test = test || is_cfg_test(&m.attrs);
            match m.content {
                Some((_, items)) => {
                    self.add(child_path, file.clone(), dir.join(&name), child_public, child_test, &m.attrs, items)?
                }
                None => {
                    let candidates = match path_attr(&m.attrs) {
                        Some(p) => vec![dir.join(p)],
                        None => vec![dir.join(format!("{name}.rs")), dir.join(&name).join("mod.rs")],
                    };
                    let child_file = candidates
                        .iter()
                        .find(|c| c.is_file())
                        .with_context(|| format!("module {} of {}: no file", name, file.display()))?
                        .clone();
                    let parsed = parse(&child_file)?;
                    let child_dir = dir.join(&name);
                    self.add(child_path, child_file, child_dir, child_public, child_test, &parsed.attrs, parsed.items)?;
                }
            }
        }
        let docs = attrs.iter().filter_map(doc_text).collect();
        self.modules.insert(
            path,
            Module { file, public, test, docs, items, defines, imports: BTreeMap::new(), globs: Vec::new(), raw_uses },
        );
        Ok(())
    }

    /// The absolute path (from the crate root) that `segments`, written in module `context`,
    /// stands for; `None` for paths into other crates.
    fn absolute(&self, context: &[String], segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" => Some([context, &segments[1..]].concat()),
            "super" => {
                let mut base = context.to_vec();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                Some([base.as_slice(), rest].concat())
            }
            _ => {
                let child = [context, std::slice::from_ref(first)].concat();
                if self.modules.contains_key(&child) {
                    return Some([context, segments].concat());
                }
                let module = self.modules.get(context)?;
                if let Some(imported) = module.imports.get(first) {
                    return Some([imported.as_slice(), &segments[1..]].concat());
                }
                // A name a glob import (`use super::*`) brings in: what it stands for there.
                module.globs.iter().find_map(|glob| {
                    let from = self.modules.get(glob)?;
                    if from.defines.contains(first) {
                        Some([glob.as_slice(), segments].concat())
                    } else {
                        from.imports.get(first).map(|imported| [imported.as_slice(), &segments[1..]].concat())
                    }
                })
            }
        }
    }

    /// The module that defines what `absolute` names, following re-exports.
    fn owner(&self, absolute: &[String], depth: usize) -> Vec<String> {
        let mut n = absolute.len();
        while n > 0 && !self.modules.contains_key(&absolute[..n]) {
            n -= 1;
        }
        let module_path = &absolute[..n];
        let Some(module) = self.modules.get(module_path) else { return Vec::new() };
        if n == absolute.len() || depth > 16 {
            return module_path.to_vec();
        }
        let name = &absolute[n];
        if module.defines.contains(name) {
            return module_path.to_vec();
        }
        if let Some(target) = module.imports.get(name) {
            return self.owner(&[target.as_slice(), &absolute[n + 1..]].concat(), depth + 1);
        }
        for glob in &module.globs {
            let through = [glob.as_slice(), &absolute[n..]].concat();
            let owner = self.owner(&through, depth + 1);
            if owner != *glob || self.modules.get(glob).is_some_and(|g| g.defines.contains(name)) {
                return owner;
            }
        }
        module_path.to_vec()
    }

    /// Every reference from one module's non-test code to another module, resolved to the
    /// module that defines the item.
    fn graph(&self) -> Graph {
        let mut graph = Graph::default();
        for (path, module) in &self.modules {
            if module.test || path.is_empty() {
                continue;
            }
            let mut collector = References::default();
            for item in &module.items {
                collector.visit_item(item);
            }
            for segments in collector.paths {
                let Some(absolute) = self.absolute(path, &segments) else { continue };
                let target = self.owner(&absolute, 0);
                if target.is_empty() {
                    continue;
                }
                let text = segments.join("::");
                let file = module.file.strip_prefix(&self.root).unwrap_or(&module.file);
                if path[0] != target[0] {
                    graph.add(None, &path[0], &target[0], file, &text);
                } else if path.len() > 1 && target.len() > 1 && path[1] != target[1] {
                    graph.add(Some(&path[0]), &path[1], &target[1], file, &text);
                }
            }
        }
        graph
    }

    /// (public modules, public items) reachable from outside the crate, test code left out: the
    /// public definitions and re-exports of public modules, and the public associated items of
    /// inherent `impl`s (wherever they are written) of the types those name (matched by name).
    fn public_counts(&self) -> (usize, usize) {
        let mut modules = 0;
        let mut items = 0;
        let mut public_types = BTreeSet::new();
        for (path, module) in &self.modules {
            if !module.public || module.test {
                continue;
            }
            if !path.is_empty() {
                modules += 1;
            }
            for item in &module.items {
                if is_cfg_test(item_attrs(item)) {
                    continue;
                }
                items += public_items(item);
                public_types.extend(public_names(item));
            }
        }
        for module in self.modules.values().filter(|m| !m.test) {
            for item in &module.items {
                if let syn::Item::Impl(i) = item {
                    if i.trait_.is_none()
                        && !is_cfg_test(&i.attrs)
                        && self_type_name(&i.self_ty).is_some_and(|n| public_types.contains(&n))
                    {
                        items += public_associated_items(i);
                    }
                }
            }
        }
        (modules, items)
    }
}

/// Edges between modules: `None` for core's top-level modules, `Some(parent)` for the child
/// modules of one top-level module.
#[derive(Default)]
struct Graph {
    edges: BTreeMap<EdgeKey, Edge>,
}

/// (scope, from, to).
type EdgeKey = (Option<String>, String, String);

/// The number of references, and one example: its file and the path written.
type Edge = (usize, PathBuf, String);

impl Graph {
    fn add(&mut self, scope: Option<&str>, from: &str, to: &str, file: &Path, text: &str) {
        let entry = self
            .edges
            .entry((scope.map(str::to_string), from.to_string(), to.to_string()))
            .or_insert_with(|| (0, file.to_path_buf(), text.to_string()));
        entry.0 += 1;
    }

    fn scopes(&self) -> BTreeSet<Option<String>> {
        self.edges.keys().map(|(scope, _, _)| scope.clone()).collect()
    }

    fn adjacency(&self, scope: &Option<String>) -> BTreeMap<String, BTreeSet<String>> {
        let mut adjacency: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (s, from, to) in self.edges.keys() {
            if s == scope {
                adjacency.entry(from.clone()).or_default().insert(to.clone());
                adjacency.entry(to.clone()).or_default();
            }
        }
        adjacency
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for scope in self.scopes() {
            match &scope {
                None => out.push_str("core's top-level modules (A -> B: A uses B, with the number of references):\n"),
                Some(parent) => out.push_str(&format!("inside {parent}:\n")),
            }
            for (from, tos) in self.adjacency(&scope) {
                if tos.is_empty() {
                    continue;
                }
                let list: Vec<String> = tos
                    .iter()
                    .map(|to| format!("{to} ({})", self.edges[&(scope.clone(), from.clone(), to.clone())].0))
                    .collect();
                out.push_str(&format!("  {from} -> {}\n", list.join(", ")));
            }
            let cycles = strongly_connected(&self.adjacency(&scope));
            if cycles.is_empty() {
                out.push_str("  cycles: none\n");
            } else {
                for cycle in cycles {
                    out.push_str(&format!("  cycle: {}\n", cycle.join(", ")));
                }
            }
        }
        out
    }

    fn cycle_problems(&self, tree: &ModuleTree) -> Vec<String> {
        let mut problems = Vec::new();
        for scope in self.scopes() {
            let explained: Vec<String> = match &scope {
                None => Vec::new(),
                Some(parent) => tree.modules[&vec![parent.clone()]]
                    .docs
                    .iter()
                    .filter(|d| d.trim_start().starts_with("Cycle:"))
                    .cloned()
                    .collect(),
            };
            for cycle in strongly_connected(&self.adjacency(&scope)) {
                let named = |line: &String| cycle.iter().all(|m| line.contains(&format!("`{m}`")));
                if explained.iter().any(named) {
                    continue;
                }
                let place = scope.as_deref().map_or("core's top-level modules".to_string(), |p| format!("inside {p}"));
                let mut text = format!("a cycle {place}: {}", cycle.join(", "));
                for ((s, from, to), (_, file, example)) in &self.edges {
                    if *s == scope && cycle.contains(from) && cycle.contains(to) {
                        text.push_str(&format!("\n    {from} -> {to}: `{example}` in {}", file.display()));
                    }
                }
                problems.push(text);
            }
        }
        problems
    }
}

/// The strongly connected components of more than one module (Tarjan's algorithm), each sorted.
fn strongly_connected(adjacency: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        adjacency: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.adjacency[v] {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.components.push(component);
            }
        }
    }
    let mut state = State {
        adjacency,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for v in adjacency.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.components.sort();
    state.components
}

/// Collects the paths one module's non-test items write: in code, in `use` items and inside
/// macro invocations (`crate::`/`super::`/`self::` paths among their tokens).
#[derive(Default)]
struct References {
    paths: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for References {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_cfg_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // A child module is a module of its own in the tree.
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
        self.paths.extend(leaves.into_iter().map(|(_, path)| path));
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.paths.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let mut flat = Vec::new();
        flatten(mac.tokens.clone(), &mut flat);
        let mut i = 0;
        while i < flat.len() {
            if matches!(flat[i].as_str(), "crate" | "super" | "self") && (i == 0 || flat[i - 1] != ":") {
                let mut segments = vec![flat[i].clone()];
                let mut j = i + 1;
                while flat.get(j).map(String::as_str) == Some(":")
                    && flat.get(j + 1).map(String::as_str) == Some(":")
                    && flat.get(j + 2).is_some_and(|next| is_ident(next))
                {
                    segments.push(flat[j + 2].clone());
                    j += 3;
                }
                if segments.len() > 1 {
                    self.paths.push(segments);
                }
                i = j;
            } else {
                i += 1;
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

fn is_ident(token: &str) -> bool {
    token.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// A token stream as a flat list of identifiers and single punctuation characters.
fn flatten(tokens: proc_macro2::TokenStream, out: &mut Vec<String>) {
    for token in tokens {
        match token {
            proc_macro2::TokenTree::Group(g) => {
                out.push("(".to_string());
                flatten(g.stream(), out);
                out.push(")".to_string());
            }
            proc_macro2::TokenTree::Ident(i) => out.push(i.to_string()),
            proc_macro2::TokenTree::Punct(p) => out.push(p.as_char().to_string()),
            proc_macro2::TokenTree::Literal(_) => out.push("\"".to_string()),
        }
    }
}

/// The leaves of a `use` tree: (the name it binds, or `None` for a glob; the full path).
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Option<String>, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => {
            if let Some(last) = prefix.last() {
                out.push((Some(last.clone()), prefix.clone()));
            }
        }
        syn::UseTree::Name(n) => {
            out.push((Some(n.ident.to_string()), [prefix.clone(), vec![n.ident.to_string()]].concat()));
        }
        syn::UseTree::Rename(r) => {
            out.push((Some(r.rename.to_string()), [prefix.clone(), vec![r.ident.to_string()]].concat()));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix.clone())),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                use_leaves(tree, prefix, out);
            }
        }
    }
}

fn defined_name(item: &syn::Item) -> Option<String> {
    Some(match item {
        syn::Item::Const(i) => i.ident.to_string(),
        syn::Item::Enum(i) => i.ident.to_string(),
        syn::Item::Fn(i) => i.sig.ident.to_string(),
        syn::Item::Macro(i) => i.ident.as_ref()?.to_string(),
        syn::Item::Mod(i) => i.ident.to_string(),
        syn::Item::Static(i) => i.ident.to_string(),
        syn::Item::Struct(i) => i.ident.to_string(),
        syn::Item::Trait(i) => i.ident.to_string(),
        syn::Item::Type(i) => i.ident.to_string(),
        syn::Item::Union(i) => i.ident.to_string(),
        _ => return None,
    })
}

/// How many public items an item contributes to the crate's API: one for a public definition,
/// one per name of a public `use`, and the public associated items of an inherent `impl`.
fn public_items(item: &syn::Item) -> usize {
    let public = |vis: &syn::Visibility| matches!(vis, syn::Visibility::Public(_));
    match item {
        syn::Item::Const(i) => public(&i.vis) as usize,
        syn::Item::Enum(i) => public(&i.vis) as usize,
        syn::Item::Fn(i) => public(&i.vis) as usize,
        syn::Item::Static(i) => public(&i.vis) as usize,
        syn::Item::Struct(i) => public(&i.vis) as usize,
        syn::Item::Trait(i) => public(&i.vis) as usize,
        syn::Item::Type(i) => public(&i.vis) as usize,
        syn::Item::Union(i) => public(&i.vis) as usize,
        syn::Item::Macro(i) => i.attrs.iter().any(|a| a.path().is_ident("macro_export")) as usize,
        syn::Item::Use(u) if public(&u.vis) => {
            let mut leaves = Vec::new();
            use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
            leaves.len()
        }
        _ => 0,
    }
}

/// The public associated items of an inherent `impl`.
fn public_associated_items(i: &syn::ItemImpl) -> usize {
    let public = |vis: &syn::Visibility| matches!(vis, syn::Visibility::Public(_));
    i.items
        .iter()
        .filter(|item| match item {
            syn::ImplItem::Const(c) => public(&c.vis) && !is_cfg_test(&c.attrs),
            syn::ImplItem::Fn(f) => public(&f.vis) && !is_cfg_test(&f.attrs),
            syn::ImplItem::Type(t) => public(&t.vis) && !is_cfg_test(&t.attrs),
            _ => false,
        })
        .count()
}

/// The type names a public item makes nameable: its own (a public struct, enum, union, type
/// alias or trait) or those a public `use` re-exports.
fn public_names(item: &syn::Item) -> Vec<String> {
    let public = |vis: &syn::Visibility| matches!(vis, syn::Visibility::Public(_));
    match item {
        syn::Item::Struct(i) if public(&i.vis) => vec![i.ident.to_string()],
        syn::Item::Enum(i) if public(&i.vis) => vec![i.ident.to_string()],
        syn::Item::Union(i) if public(&i.vis) => vec![i.ident.to_string()],
        syn::Item::Type(i) if public(&i.vis) => vec![i.ident.to_string()],
        syn::Item::Use(u) if public(&u.vis) => {
            let mut leaves = Vec::new();
            use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
            leaves.into_iter().filter_map(|(name, path)| name.and(path.last().cloned())).collect()
        }
        _ => Vec::new(),
    }
}

fn self_type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `#[cfg(test)]` (or a `cfg` whose condition starts with `test`, e.g. `cfg(test)` alone).
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && matches!(&a.meta, syn::Meta::List(list) if list.tokens.to_string().trim() == "test")
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn doc_text(attr: &syn::Attribute) -> Option<String> {
    if !attr.path().is_ident("doc") {
        return None;
    }
    match &attr.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    }
}

fn parse(file: &Path) -> Result<syn::File> {
    let text = std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))?;
    syn::parse_file(&text).with_context(|| format!("parse {}", file.display()))
}

/// The repository's tracked files (`git ls-files`), relative to `root`.
fn tracked_files(root: &Path) -> Result<Vec<PathBuf>> {
    let listing = crate::util::output(std::process::Command::new("git").arg("-C").arg(root).arg("ls-files"))?;
    Ok(listing.lines().filter(|l| !l.is_empty()).map(PathBuf::from).collect())
}

/// Rust source files whose first line is not a `//!` doc.
fn missing_file_docs(root: &Path, files: &[PathBuf]) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for file in files {
        if file.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(root.join(file)).with_context(|| format!("read {}", file.display()))?;
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        if !first.trim_start().starts_with("//!") {
            problems.push(format!("{}: no //! doc at the top of the file (say what it holds)", file.display()));
        }
    }
    Ok(problems)
}

/// The notes kept beside the checkout (`../shared/reference/`), which the repository must not
/// cite: whoever reads the code has only the repository and upstream's sources.
const OUTSIDE_NOTES: &[&str] =
    &["karpenter-core.md", "karpenter-aws.md", "controller.md", "cluster-autoscaler.md", "ecosystem.md", "testenv.md"];

/// Citations of documents that are not in the repository: the outside notes by name or by
/// section (a section sign), and relative Markdown links to missing files.
fn outside_references(root: &Path, files: &[PathBuf]) -> Result<Vec<String>> {
    let tracked: BTreeSet<String> =
        files.iter().filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned())).collect();
    // Our documents have no numbered sections: a section sign cites the outside notes.
    let section_sign = '\u{a7}';
    let mut problems = Vec::new();
    for file in files {
        let text_file = matches!(
            file.extension().and_then(|e| e.to_str()),
            Some("rs" | "md" | "toml" | "go" | "yaml" | "yml" | "sh" | "html" | "css" | "js")
        );
        if !text_file || file.ends_with("xtask/src/tidy.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(file)) else { continue };
        for (n, line) in text.lines().enumerate() {
            let at = format!("{}:{}", file.display(), n + 1);
            if line.contains(section_sign) || line.contains("shared/reference") {
                problems.push(format!("{at}: cites notes outside the repository; cite upstream's file and version"));
            }
            for note in OUTSIDE_NOTES {
                if line.contains(note) && !tracked.contains(*note) {
                    problems.push(format!("{at}: cites {note}, which is not in the repository"));
                }
            }
            if file.extension().is_some_and(|e| e == "md") {
                for target in markdown_links(line) {
                    let base = root.join(file).parent().map(Path::to_path_buf).unwrap_or_default();
                    let path = target.split('#').next().unwrap_or("");
                    if !path.is_empty() && !base.join(path).exists() {
                        problems.push(format!("{at}: links to {target}, which is not in the repository"));
                    }
                }
            }
        }
    }
    Ok(problems)
}

/// The relative targets of Markdown links `[text](target)` on one line (not URLs or anchors).
fn markdown_links(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].trim();
        let external = target.contains("://") || target.starts_with('#') || target.starts_with("mailto:");
        if !external && !target.is_empty() && !target.contains(' ') {
            targets.push(target.to_string());
        }
        rest = &after[end..];
    }
    targets
}
