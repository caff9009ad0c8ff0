//! Every relative link in the README, the changelog and the guide (`docs/`) leads
//! somewhere: the file or folder it names exists, and a `#anchor` into a Markdown file
//! names one of its headings.
//!
//! The README is a front page that links into `docs/`, and the guide links across its
//! pages and into the source (`src/`, `lua/`, `tests/`). Pages get split, renamed and
//! moved, and a broken link is invisible until a reader clicks it; this test makes it a
//! failure instead. Pure file parsing: no Redis, no network, std only.
//!
//! What counts as a link: `[text](target)` and `![alt](target)` outside fenced code blocks
//! and inline code spans, and reference definitions `[label]: target`. A target with a
//! scheme (`https:`, `mailto:` ...) is external and not checked. Anchors follow GitHub's
//! rule for headings: the heading's text, lowercased, with everything but letters,
//! digits, `-`, `_` and spaces removed, and spaces turned into `-`; a repeated heading
//! gets `-1`, `-2`, ... in order. Only ATX headings (`# ...`) are recognised, which is
//! all this repository writes, plus explicit `<a id="...">` / `<a name="...">` anchors.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

#[test]
fn every_relative_link_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let documents = documents(root);
    // The test must not pass by finding nothing to check.
    for required in ["README.md", "CHANGELOG.md", "docs/README.md"] {
        assert!(
            documents.contains(&root.join(required)),
            "{required} is missing, or not among the documents checked"
        );
    }
    let broken = check(root, &documents);
    assert!(
        broken.is_empty(),
        "{} broken link(s) in the documentation:\n  {}",
        broken.len(),
        broken.join("\n  ")
    );
}

/// The checker's own teeth: a small tree with one link of every kind that must be found
/// broken, next to links of every kind that must pass.
#[test]
fn broken_links_of_every_kind_are_reported() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    fs::create_dir_all(root.join("docs")).unwrap();
    fs::create_dir_all(root.join("src/lock")).unwrap();
    fs::write(root.join("src/lock/mod.rs"), "").unwrap();
    fs::write(
        root.join("README.md"),
        "# Front page\n\
         \n\
         [good page](docs/guide.md), [good anchor](docs/guide.md#run-a-command-under-a-lock),\n\
         [second of two](docs/guide.md#notes-1), [own heading](#front-page),\n\
         [source](src/lock/mod.rs), [folder](src/lock/), [line](src/lock/mod.rs#L3),\n\
         [external](https://example.com/missing.md), [mail](mailto:nobody@example.com),\n\
         [titled](docs/guide.md \"a title\"), [angled](<docs/guide.md>)\n\
         \n\
         [missing page](docs/nowhere.md) and [missing anchor](docs/guide.md#no-such-heading)\n\
         and [third of two](docs/guide.md#notes-2) and ![missing image](docs/pic.png)\n\
         and [missing source](src/lock/gone.rs) and [own missing](#nothing-here)\n\
         and [escapes](../outside.md) and [bad line anchor](src/lock/mod.rs#top)\n\
         \n\
         [ref]: docs/also-missing.md\n\
         \n\
         `[in code](docs/inline-code.md)` is code, not a link.\n\
         \n\
         ```text\n\
         [in a fence](docs/fenced.md)\n\
         ```\n",
    )
    .unwrap();
    fs::write(
        root.join("docs/guide.md"),
        "# Guide\n\n## `run`: a command under a lock\n\n## Notes\n\n## Notes\n\n\
         [back](../README.md#front-page)\n",
    )
    .unwrap();
    let documents = documents(root);
    let broken = check(root, &documents);
    let expected = [
        "docs/nowhere.md",
        "docs/guide.md#no-such-heading",
        "docs/guide.md#notes-2",
        "docs/pic.png",
        "src/lock/gone.rs",
        "#nothing-here",
        "../outside.md",
        "src/lock/mod.rs#top",
        "docs/also-missing.md",
    ];
    for target in expected {
        assert!(
            broken.iter().any(|b| b.contains(&format!("({target})"))),
            "not reported: {target}\nreported:\n{}",
            broken.join("\n")
        );
    }
    assert_eq!(
        broken.len(),
        expected.len(),
        "reported more than the broken links:\n{}",
        broken.join("\n")
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    let anchors = anchors_of(
        "# redis-locks\n\
         ## Multi-lock: several locks, all or none\n\
         ### `run`: a command under a lock\n\
         ### Spin mode: waiting without pub/sub\n\
         ## Limits (read before relying on it)\n\
         ## RLock\n\
         ## Notes ##\n\
         ## Notes\n\
         ```sh\n\
         # a comment in a fence, not a heading\n\
         ```\n\
         ## release_first.lua and [a link](x.md)\n\
         <a id=\"explicit\"></a>\n",
    );
    for anchor in [
        "redis-locks",
        "multi-lock-several-locks-all-or-none",
        "run-a-command-under-a-lock",
        "spin-mode-waiting-without-pubsub",
        "limits-read-before-relying-on-it",
        "rlock",
        "notes",
        "notes-1",
        "release_firstlua-and-a-link",
        "explicit",
    ] {
        assert!(anchors.contains(anchor), "no anchor {anchor}: {anchors:?}");
    }
    assert!(!anchors.contains("a-comment-in-a-fence-not-a-heading"));
}

/// The documents whose links are checked: the README, the changelog and every Markdown
/// file under `docs/`, in a stable order.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["README.md", "CHANGELOG.md"]
        .iter()
        .map(|name| root.join(name))
        .filter(|path| path.is_file())
        .collect();
    let mut pending = vec![root.join("docs")];
    let mut guide = Vec::new();
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a readable directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                guide.push(path);
            }
        }
    }
    guide.sort();
    files.extend(guide);
    files
}

/// Every broken link in `documents`, one line each: `file:line: (target): why`.
fn check(root: &Path, documents: &[PathBuf]) -> Vec<String> {
    let mut anchors: HashMap<PathBuf, HashSet<String>> = HashMap::new();
    let mut broken = Vec::new();
    for document in documents {
        let text = fs::read_to_string(document)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", document.display()));
        let shown = display(root, document);
        for link in links(&text) {
            if let Err(why) = resolve(root, document, &link.target, &mut anchors) {
                broken.push(format!("{shown}:{}: ({}): {why}", link.line, link.target));
            }
        }
    }
    broken
}

/// Whether `target`, linked from `document`, resolves; if not, why.
fn resolve(
    root: &Path,
    document: &Path,
    target: &str,
    anchors: &mut HashMap<PathBuf, HashSet<String>>,
) -> Result<(), String> {
    if is_external(target) {
        return Ok(());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let path = percent_decode(path);
    let file = if path.is_empty() {
        document.to_path_buf()
    } else if let Some(from_root) = path.strip_prefix('/') {
        root.join(from_root)
    } else {
        document.parent().expect("a document's folder").join(&path)
    };
    let Some(file) = normalise(&file) else {
        return Err("leads outside the repository".to_owned());
    };
    if !file.starts_with(root) {
        return Err("leads outside the repository".to_owned());
    }
    if !file.exists() {
        return Err(format!("no such file: {}", display(root, &file)));
    }
    let Some(anchor) = anchor.filter(|anchor| !anchor.is_empty()) else {
        return Ok(());
    };
    let anchor = percent_decode(anchor);
    if file.extension().is_some_and(|ext| ext == "md") && file.is_file() {
        let known = anchors.entry(file.clone()).or_insert_with(|| {
            anchors_of(&fs::read_to_string(&file).expect("a readable Markdown file"))
        });
        if known.contains(&anchor) {
            Ok(())
        } else {
            Err(format!(
                "no heading in {} has the anchor #{anchor}",
                display(root, &file)
            ))
        }
    } else if is_line_anchor(&anchor) {
        // GitHub's source view: `#L10` or `#L10-L20`.
        Ok(())
    } else {
        Err(format!(
            "#{anchor} is neither a heading of a Markdown file nor a line (#L10)"
        ))
    }
}

/// A link found in a document.
struct Link {
    line: usize,
    target: String,
}

/// The links of a Markdown text, outside fenced code and inline code spans.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    let mut fence = Fence::default();
    for (index, line) in text.lines().enumerate() {
        if fence.skip(line) {
            continue;
        }
        let line_number = index + 1;
        if let Some(target) = reference_definition(line) {
            found.push(Link {
                line: line_number,
                target,
            });
            continue;
        }
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let (target, used) = link_target(after);
            if !target.is_empty() {
                found.push(Link {
                    line: line_number,
                    target,
                });
            }
            rest = &after[used..];
        }
    }
    found
}

/// The anchors of a Markdown text's headings (GitHub's rule, duplicates numbered), and
/// its explicit HTML anchors.
fn anchors_of(text: &str) -> HashSet<String> {
    let mut anchors = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut fence = Fence::default();
    for line in text.lines() {
        if fence.skip(line) {
            continue;
        }
        if let Some(heading) = heading_text(line) {
            let base = slug(heading);
            let count = seen.entry(base.clone()).or_insert(0);
            let anchor = if *count == 0 {
                base
            } else {
                format!("{base}-{count}")
            };
            *count += 1;
            anchors.insert(anchor);
        }
        for attribute in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find("<a ") {
                rest = &rest[at + 3..];
                let tag = &rest[..rest.find('>').unwrap_or(rest.len())];
                if let Some(start) = tag.find(attribute) {
                    let value = &tag[start + attribute.len()..];
                    if let Some(end) = value.find('"') {
                        anchors.insert(value[..end].to_owned());
                    }
                }
            }
        }
    }
    anchors
}

/// Fenced code blocks (``` or ~~~, three or more, closed by the same character at least
/// as many times): `skip` says whether a line is part of one, fences included.
#[derive(Default)]
struct Fence {
    open: Option<(char, usize)>,
}

impl Fence {
    fn skip(&mut self, line: &str) -> bool {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match (self.open, marker) {
            (None, Some(c)) if run >= 3 => {
                self.open = Some((c, run));
                true
            }
            (Some((c, open_run)), Some(m))
                if m == c && run >= open_run && trimmed[run..].trim().is_empty() =>
            {
                self.open = None;
                true
            }
            (Some(_), _) => true,
            (None, _) => false,
        }
    }
}

/// The text of an ATX heading (`#` to `######`, at most three spaces in), without its
/// closing `#`s.
fn heading_text(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let line = &line[indent..];
    let level = line.chars().take_while(|c| *c == '#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &line[level..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let rest = rest.trim();
    let without_closing = rest.trim_end_matches('#');
    if without_closing.is_empty() || without_closing.ends_with(' ') {
        Some(without_closing.trim_end())
    } else {
        Some(rest)
    }
}

/// GitHub's anchor for a heading: its rendered text (links as their text, no code or
/// emphasis markers), lowercased, only letters, digits, `-`, `_` and spaces kept, spaces
/// turned into `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link renders as its text: drop the `(target)` after every `]`.
    while let Some(at) = rest.find("](") {
        text.push_str(&rest[..at]);
        let (_, used) = link_target(&rest[at + 2..]);
        rest = &rest[at + 2 + used..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The target of a link whose `](` came just before `after`, and how many bytes of
/// `after` the target and its closing `)` take. A title (`"..."`) is dropped; `<...>`
/// encloses a target with spaces.
fn link_target(after: &str) -> (String, usize) {
    let inner = after.trim_start();
    let skipped = after.len() - inner.len();
    // Written without `if let` chains: the crate's MSRV predates them.
    let angled = inner
        .strip_prefix('<')
        .and_then(|angled| angled.find('>').map(|end| (angled, end)));
    if let Some((angled, end)) = angled {
        let close = angled[end..]
            .find(')')
            .map_or(angled.len(), |c| end + c + 1);
        return (angled[..end].to_owned(), skipped + 1 + close);
    }
    let mut depth = 0usize;
    let mut end = inner.len();
    for (i, c) in inner.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                end = i;
                break;
            }
            ')' => depth -= 1,
            c if c.is_whitespace() => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let target = inner[..end].to_owned();
    let close = inner[end..].find(')').map_or(inner.len(), |c| end + c + 1);
    (target, skipped + close)
}

/// A reference definition's target: `[label]: target`, at most three spaces in.
fn reference_definition(line: &str) -> Option<String> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = line[indent..].strip_prefix('[')?;
    let close = rest.find("]:")?;
    if close == 0 || rest[..close].contains('[') {
        return None;
    }
    let target = rest[close + 2..].split_whitespace().next()?;
    let target = target.trim_start_matches('<').trim_end_matches('>');
    Some(target.to_owned())
}

/// `line` with its inline code spans (a run of backticks up to the next run of the same
/// length) removed; an unmatched run stays as it is.
fn without_code_spans(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let mut kept = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|b| **b == b'`').count();
        let mut j = i + run;
        let mut closed = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let other = bytes[j..].iter().take_while(|b| **b == b'`').count();
                if other == run {
                    closed = Some(j + other);
                    break;
                }
                j += other;
            } else {
                j += 1;
            }
        }
        match closed {
            Some(end) => {
                out.push_str(&line[kept..i]);
                kept = end;
                i = end;
            }
            None => i += run,
        }
    }
    out.push_str(&line[kept..]);
    out
}

/// A target with a URL scheme (`https:`, `mailto:` ...): not a file of this repository.
fn is_external(target: &str) -> bool {
    match target.find(':') {
        Some(colon) => {
            let scheme = &target[..colon];
            scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// `L10` or `L10-L20`.
fn is_line_anchor(anchor: &str) -> bool {
    let number = |s: &str| {
        s.strip_prefix('L')
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    match anchor.split_once('-') {
        Some((from, to)) => number(from) && number(to),
        None => number(anchor),
    }
}

/// `%20` and the like decoded; anything malformed left as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        if let (b'%', Some(byte)) = (bytes[i], hex) {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// `path` with `.` and `..` resolved by their names alone (no symlinks followed); `None`
/// if it climbs above the filesystem's root.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

/// `path` relative to the repository, for messages.
fn display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}
