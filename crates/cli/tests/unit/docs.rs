//! The docs keep to the binary and to the benchmarks: every `headroom` command line in README.md and
//! docs/*.md parses with today's flags, every reference to a benchmark section (from the docs or
//! from a comment in the code) names one that exists, and every figure the README's results table
//! quotes is in the section it links to.
//!
//! A unit test of the binary (included from `main.rs` under `cfg(test)`), so that it parses with the
//! very `Cli` the binary uses; it lives here so that `src/` holds the product only.

use std::path::{Path, PathBuf};

use clap::Parser as _;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use headroom_cli::cmd::Cli;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and the top level of docs/ (docs/history keeps past rounds as they were written).
fn documents() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("docs/ entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(repo().join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect()
}

/// The files whose comments cite the docs: the crates, scripts, configs and CI, beside the docs.
fn documents_and_sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| ["rs", "sh", "py", "toml"].iter().any(|x| e == *x)) {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in ["crates", "scripts", "configs", "docker", ".ci"] {
        walk(&repo().join(dir), &mut files);
    }
    files.sort();
    let mut out = documents();
    for path in files {
        if let Ok(text) = std::fs::read_to_string(&path) {
            let name = path.strip_prefix(repo()).unwrap_or(&path).to_string_lossy().into_owned();
            out.push((name, text));
        }
    }
    out
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// A piece of code in a document: a fenced shell block's text, or an inline code span.
struct Snippet {
    line: usize,
    code: String,
    fenced: bool,
}

fn snippets(text: &str) -> Vec<Snippet> {
    let mut out = Vec::new();
    let mut block: Option<(usize, String)> = None;
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let lang = info.split_whitespace().next().unwrap_or("");
                if matches!(lang, "" | "sh" | "bash" | "shell" | "console") {
                    block = Some((line_of(text, range.start) + 1, String::new()));
                }
            }
            Event::Text(t) => {
                if let Some((_, code)) = block.as_mut() {
                    code.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((line, code)) = block.take() {
                    out.push(Snippet { line, code, fenced: true });
                }
            }
            Event::Code(code) => out.push(Snippet {
                line: line_of(text, range.start),
                code: code.into_string(),
                fenced: false,
            }),
            _ => {}
        }
    }
    out
}

/// The `headroom` invocations in one snippet, as argument vectors with their line. A fenced block is
/// read as a shell reads it (continuations, `&&`, `;`, pipes, comments, `VAR=value` prefixes); an
/// inline span may use the usage notation of the docs' tables, which is read as its first reading:
/// `[--seed N]` as `--seed N`, `cpu\|cuda` as `cpu`, `...` dropped.
fn invocations(snippet: &Snippet) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let joined = snippet.code.replace("\\\n", " ");
    for (i, raw) in joined.lines().enumerate() {
        let mut line = raw.trim().trim_start_matches("$ ").replace("; ", " ; ");
        if !snippet.fenced {
            line = line.replace(['[', ']'], "").replace("\\|", "|");
        }
        let Some(words) = shlex::split(&line) else { continue };
        for segment in words.split(|w| matches!(w.as_str(), "&&" | "||" | ";" | "|")) {
            let mut words: Vec<String> = segment
                .iter()
                .take_while(|w| {
                    !w.starts_with('#') && !w.starts_with('>') && !w.starts_with("2>") && *w != "<"
                })
                .skip_while(|w| {
                    w.contains('=') && !w.starts_with('-') || matches!(w.as_str(), "sudo" | "exec" | "time")
                })
                .cloned()
                .collect();
            let is_headroom = words.first().is_some_and(|w| w == "headroom" || w.ends_with("/headroom"));
            if !is_headroom {
                continue;
            }
            words[0] = "headroom".to_owned();
            if !snippet.fenced {
                words = words
                    .into_iter()
                    .filter(|w| w != "..." && w != "…")
                    .map(|w| w.split('|').next().unwrap_or_default().to_owned())
                    .collect();
            }
            out.push((snippet.line + if snippet.fenced { i } else { 0 }, words));
        }
    }
    out
}

/// A value written as a placeholder (`N`, `SIZE`, `cuda:N`; `T.onnx` is not one): refused by a
/// typed flag, and still a true command line.
fn is_placeholder(value: &str) -> bool {
    let last = value.rsplit(':').next().unwrap_or_default();
    last.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && last.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || "_.".contains(c))
}

/// Why this command line would not run as the docs say, or None when it parses (or, for an inline
/// span, when all it lacks is a required flag or a subcommand: prose may name a verb alone).
fn refusal(words: &[String], fenced: bool) -> Option<String> {
    let err = match Cli::try_parse_from(words) {
        Ok(_) => return None,
        Err(err) => err,
    };
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => None,
        ErrorKind::MissingRequiredArgument
        | ErrorKind::MissingSubcommand
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            if !fenced =>
        {
            None
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation if matches!(err.get(ContextKind::InvalidValue), Some(ContextValue::String(v)) if is_placeholder(v)) => {
            None
        }
        // Prose names a flag without its value (`headroom train --teacher`).
        ErrorKind::InvalidValue
            if !fenced
                && matches!(err.get(ContextKind::InvalidValue), Some(ContextValue::String(v)) if v.is_empty()) =>
        {
            None
        }
        _ => Some(err.render().to_string().lines().next().unwrap_or_default().to_owned()),
    }
}

#[test]
fn every_headroom_command_line_in_the_docs_parses_with_todays_flags() {
    let mut checked = 0;
    let mut fenced = 0;
    let mut failures = Vec::new();
    for (name, text) in documents() {
        for snippet in snippets(&text) {
            for (line, words) in invocations(&snippet) {
                checked += 1;
                fenced += usize::from(snippet.fenced);
                if let Some(why) = refusal(&words, snippet.fenced) {
                    failures.push(format!("{name}:{line}: `{}`: {why}", words.join(" ")));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} command lines do not parse:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // README and GUIDE alone quote well over a hundred: a parser that found none would pass vacuously.
    assert!(checked >= 100 && fenced >= 10, "only {checked} command lines ({fenced} in shell blocks) found");
}

#[test]
fn the_check_refuses_what_todays_binary_refuses() {
    let parse = |code: &str, fenced: bool| -> Vec<Option<String>> {
        invocations(&Snippet { line: 1, code: code.to_owned(), fenced })
            .iter()
            .map(|(_, words)| refusal(words, fenced))
            .collect()
    };
    assert!(
        parse("headroom train --epochs 3 --frobnicate", true)[0]
            .as_deref()
            .is_some_and(|e| e.contains("--frobnicate"))
    );
    assert!(parse("headroom label --runtime gpu --teacher t.onnx --images i --out o", true)[0].is_some());
    assert_eq!(parse("headroom label --teacher t.onnx --images i --out o --seed N", true), vec![None]);
    // A fenced command must be complete; prose may name a verb alone.
    assert!(parse("headroom label", true)[0].is_some());
    assert_eq!(parse("headroom label", false), vec![None]);
    assert_eq!(parse("headroom train --teacher", false), vec![None]);
    assert!(parse("headroom train --teacher", true)[0].is_some());
    assert_eq!(parse("headroom plan --model m.onnx --device cuda:N", true), vec![None]);
    // The tables' usage notation reads as its first choice, and a shell line as a shell splits it.
    assert_eq!(parse("headroom label [--runtime auto\\|onnxruntime\\|torch] [--seed 0]", false), vec![None]);
    assert_eq!(
        parse("cd x && sudo HEADROOM=1 bin/headroom doctor --json | jq . # a comment", true),
        vec![None]
    );
    assert!(parse("source env.sh; headroom doctor --nope 2>/dev/null", true)[0].is_some());
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The headings of a document with their byte ranges: (plain text, level, start of the heading,
/// end of its section).
fn sections(text: &str) -> Vec<(String, usize, usize, usize)> {
    let mut found: Vec<(String, usize, usize, usize)> = Vec::new();
    let mut current: Option<(String, usize, usize)> = None;
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                current = Some((String::new(), level as usize, range.start))
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((heading, ..)) = current.as_mut() {
                    heading.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((heading, level, start)) = current.take() {
                    found.push((heading, level, start, text.len()));
                }
            }
            _ => {}
        }
    }
    for i in 0..found.len() {
        let level = found[i].1;
        if let Some(next) = found[i + 1..].iter().find(|(_, l, ..)| *l <= level) {
            found[i].3 = next.2;
        }
    }
    found
}

fn read(name: &str) -> String {
    std::fs::read_to_string(repo().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_benchmark_reference_names_a_section_that_exists() {
    let targets = [
        ("history/BENCHMARKS-rounds.md", "docs/history/BENCHMARKS-rounds.md"),
        ("BENCHMARKS.md", "docs/BENCHMARKS.md"),
    ];
    let headings: Vec<(&str, Vec<String>)> = targets
        .iter()
        .map(|(short, path)| {
            (*short, sections(&read(path)).into_iter().map(|s| s.0.replace('`', "")).collect())
        })
        .collect();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, text) in documents_and_sources() {
        if name.ends_with("tests/unit/docs.rs") {
            continue;
        }
        for (number, line) in text.lines().enumerate() {
            for (short, heads) in &headings {
                // `BENCHMARKS.md "Heading"` (or a part of one), and links `BENCHMARKS.md#anchor`.
                let mut rest = line;
                while let Some(at) = rest.find(short) {
                    let before = &rest[..at];
                    let after = &rest[at + short.len()..];
                    rest = after;
                    if *short == "BENCHMARKS.md" && before.ends_with("history/") {
                        continue;
                    }
                    // A quote that does not close on its line (a wrapped comment) is not read.
                    let quote = after
                        .trim_start_matches('`')
                        .trim_start()
                        .strip_prefix(['"', '“'])
                        .and_then(|q| q.find(['"', '”']).map(|end| &q[..end]));
                    if let Some(quote) = quote.filter(|q| !q.is_empty()) {
                        checked += 1;
                        let quote = quote.replace('`', "");
                        if !heads.iter().any(|h| h.contains(&quote)) {
                            failures
                                .push(format!("{name}:{}: {short} has no section \"{quote}\"", number + 1));
                        }
                    } else if let Some(anchor) = after.strip_prefix('#') {
                        checked += 1;
                        let anchor: String = anchor
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
                            .collect();
                        if !heads.iter().any(|h| slug(h) == anchor) {
                            failures.push(format!("{name}:{}: {short} has no anchor #{anchor}", number + 1));
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} references to benchmark sections are broken:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 20, "only {checked} references to benchmark sections found");
}

/// The numbers written in a piece of text: `0.461`, `78`, `2026-12-06` (a date, whole), `1.0` of
/// `1.0–1.8`; signs and units aside.
fn numbers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars().chain([' ']) {
        if c.is_ascii_digit() || (!current.is_empty() && matches!(c, '.' | ',' | '-')) {
            current.push(c);
        } else if !current.is_empty() {
            out.push(current.trim_end_matches(['.', ',', '-']).to_owned());
            current.clear();
        }
    }
    out
}

/// Whether `number` is written in `text` as a number of its own (not inside a longer one).
fn quotes_number(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + number.len()..].chars().collect::<Vec<_>>();
        let digit_after = after.first().is_some_and(char::is_ascii_digit)
            || (matches!(after.first(), Some('.' | ',')) && after.get(1).is_some_and(char::is_ascii_digit));
        !before.is_some_and(|c| c.is_ascii_digit() || c == '.') && !digit_after
    })
}

#[test]
fn the_readme_results_are_the_figures_of_benchmarks() {
    let readme = read("README.md");
    let benchmarks = read("docs/BENCHMARKS.md");
    let bench_sections = sections(&benchmarks);
    let results = sections(&readme)
        .into_iter()
        .find(|(heading, level, ..)| *level == 2 && heading.starts_with("Results"))
        .expect("README.md has a \"## Results\" section");
    let table = &readme[results.2..results.3];
    // Each row: its cells' text (links' text aside) and the anchors it links to.
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let (mut in_row, mut in_link) = (false, false);
    for event in Parser::new_ext(table, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::TableRow) => {
                in_row = true;
                rows.push((String::new(), Vec::new()));
            }
            Event::End(TagEnd::TableRow) => in_row = false,
            Event::Start(Tag::Link { dest_url, .. }) if in_row => {
                in_link = true;
                rows.last_mut().expect("a row").1.push(dest_url.into_string());
            }
            Event::End(TagEnd::Link) => in_link = false,
            Event::Text(t) | Event::Code(t) if in_row && !in_link => {
                let row = &mut rows.last_mut().expect("a row").0;
                row.push_str(&t);
                row.push(' ');
            }
            Event::End(TagEnd::TableCell) if in_row => rows.last_mut().expect("a row").0.push_str(" | "),
            _ => {}
        }
    }
    assert!(rows.len() >= 5, "the README's results table has {} rows", rows.len());
    let mut failures = Vec::new();
    for (row, links) in &rows {
        let Some(anchor) = links.iter().find_map(|l| l.strip_prefix("docs/BENCHMARKS.md#")) else {
            failures.push(format!("row `{row}` links to no section of docs/BENCHMARKS.md"));
            continue;
        };
        let Some(section) = bench_sections.iter().find(|(heading, ..)| slug(heading) == anchor) else {
            failures.push(format!("row `{row}`: docs/BENCHMARKS.md has no section #{anchor}"));
            continue;
        };
        let body = &benchmarks[section.2..section.3];
        let figures = numbers(row);
        assert!(!figures.is_empty(), "row `{row}` quotes no figure");
        assert!(
            figures.iter().any(|n| n.len() == 10 && n.matches('-').count() == 2),
            "row `{row}` gives no date"
        );
        for number in figures {
            if !quotes_number(body, &number) {
                failures
                    .push(format!("row `{row}`: {number} is not in docs/BENCHMARKS.md \"{}\"", section.0));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the README quotes figures that BENCHMARKS does not hold:\n{}",
        failures.join("\n")
    );
}

#[test]
fn numbers_are_read_whole() {
    assert_eq!(
        numbers("78 % (0.088 → 0.461), 0.84–0.91×, 2026-12-06, −2.4 points"),
        ["78", "0.088", "0.461", "0.84", "0.91", "2026-12-06", "2.4"]
    );
    assert!(quotes_number("recovered 78 % of", "78"));
    assert!(!quotes_number("recovered 178 % and 78.5", "78"));
    assert!(!quotes_number("0.4611", "0.461"));
    assert_eq!(slug("Wall time against Ultralytics"), "wall-time-against-ultralytics");
}
