//! False positives of the secret rules: how many ordinary words and names they would mask.
//!
//! ```sh
//! cargo bench --bench scrub_fp --target x86_64-unknown-linux-gnu [-- <shared/data dir>]
//! ```
//!
//! Runs the registration rules of `src/secrets.rs` over what a gateway really meets:
//! - launch specs: every server of the committed client configs (`tests/fixtures/configs/`,
//!   `examples/*.config.json`), and each of the 328 real server names of the benchmark catalog
//!   (`<shared/data>/catalogs/combined.jsonl`, when it is there) given as an argument
//!   (`npx -y <name>`, the way the issue's false positives came about);
//! - catalog text: every token (a run of a key's characters) of the server names, tool names,
//!   descriptions and schemas of the committed catalogs (`tests/fixtures/*.jsonl`) and of the
//!   benchmark catalog: a token taken for a key would be registered if a config held it as an
//!   argument, and masked in a server description;
//! - the glue rule: the texts of those catalogs that the secrets registered from the configs
//!   would change.
//!
//! Prints every value taken, so a reader judges each, and the same counts under the rule this
//! one replaced (16+ key characters mixing letters and digits), and how many random keys of
//! each alphabet and length the rule finds (its recall). See BENCHMARKS.md for the figures.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use discovery::secrets;
use serde_json::Value;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or_else(|| root.join("../shared/data"), PathBuf::from);
    let benchmark = std::fs::read_to_string(data.join("catalogs/combined.jsonl")).ok();
    if benchmark.is_none() {
        println!("(no {}: the benchmark catalog is left out)\n", data.display());
    }
    let registered = launch_specs(root, benchmark.as_deref());
    let mut catalogs: Vec<(String, String)> = ["catalog.jsonl", "registry-catalog.jsonl", "bad-catalog.jsonl"]
        .iter()
        .filter_map(|f| {
            Some((
                (*f).to_owned(),
                std::fs::read_to_string(root.join("tests/fixtures").join(f)).ok()?,
            ))
        })
        .collect();
    if let Some(text) = benchmark {
        catalogs.push(("combined.jsonl (benchmark)".into(), text));
    }
    catalog_tokens(&catalogs);
    glue(&catalogs, &registered);
    recall();
}

/// What the launch specs register, printed value by value; returns the values.
fn launch_specs(root: &Path, benchmark: Option<&str>) -> Vec<String> {
    println!("## Launch specs\n");
    let mut specs = committed_specs(root);
    let committed = specs.len();
    let names: BTreeSet<String> = benchmark
        .into_iter()
        .flat_map(catalog_lines)
        .map(|l| server_of(&l))
        .collect();
    specs.extend(names.iter().map(|name| Spec {
        origin: "benchmark catalog".into(),
        name: name.clone(),
        args: vec!["-y".into(), name.clone()],
        ..Spec::default()
    }));
    let mut registered = Vec::new();
    let (mut by_shape_now, mut by_shape_before) = (0, 0);
    for spec in &specs {
        let values = spec.secrets();
        for value in &values {
            println!("- {} `{}`: registers `{value}`", spec.origin, spec.name);
        }
        registered.extend(values);
        by_shape_now += spec.args.iter().filter(|a| secrets::looks_like_key(a)).count();
        by_shape_before += spec.args.iter().filter(|a| old_looks_like_key(a)).count();
    }
    println!(
        "\n{} servers ({committed} from committed configs, {} benchmark names as arguments): {} values registered; \
         arguments taken for keys by shape: {by_shape_now} (the rule before: {by_shape_before})\n",
        specs.len(),
        names.len(),
        registered.len()
    );
    registered
}

/// How many distinct tokens of each catalog the key-shape rule takes, now and before.
fn catalog_tokens(catalogs: &[(String, String)]) {
    println!("## Catalog tokens\n");
    for (name, text) in catalogs {
        let tokens: BTreeSet<&str> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || "-_+/=.~".contains(c)))
            .map(|t| t.trim_end_matches('.'))
            .filter(|t| !t.is_empty())
            .collect();
        let now: Vec<&str> = tokens.iter().copied().filter(|t| secrets::looks_like_key(t)).collect();
        let before = tokens.iter().filter(|t| old_looks_like_key(t)).count();
        println!(
            "- {name}: {} distinct tokens; taken for keys: {} ({:.3}%) {:?}; the rule before: {before} ({:.3}%)",
            tokens.len(),
            now.len(),
            percent(now.len(), tokens.len()),
            now,
            percent(before, tokens.len()),
        );
    }
}

/// How many tool entries of each catalog the registered secrets change (glued or whole).
fn glue(catalogs: &[(String, String)], registered: &[String]) {
    println!("\n## Glue rule\n");
    secrets::register("bench", registered.iter().cloned());
    for (name, text) in catalogs {
        let lines = catalog_lines(text);
        let changed: Vec<&String> = lines.iter().filter(|l| secrets::scrub(l) != l.as_str()).collect();
        println!(
            "- {name}: {} of {} tool entries changed by the {} registered secrets",
            changed.len(),
            lines.len(),
            registered.len()
        );
        for line in changed.iter().take(5) {
            println!("  - {}", secrets::scrub(line));
        }
    }
}

/// How many random keys of each alphabet and length the key-shape rule finds.
fn recall() {
    println!("\n## Recall on random keys (2,000 of each)\n");
    println!("| alphabet | 16 | 20 | 24 | 32 | 40 |");
    println!("|---|---|---|---|---|---|");
    let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
    for (label, alphabet) in [
        (
            "base62",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        ),
        ("hex", "0123456789abcdef"),
        ("lower + digits", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ] {
        let cells: Vec<String> = [16, 20, 24, 32, 40]
            .iter()
            .map(|&len| {
                // Keys mix letters and digits by definition here: a draw of one class is redrawn.
                let keys: Vec<String> = std::iter::repeat_with(|| random.string(alphabet, len))
                    .filter(|k| k.chars().any(|c| c.is_ascii_digit()) && k.chars().any(|c| c.is_ascii_alphabetic()))
                    .take(2000)
                    .collect();
                let found = keys.iter().filter(|k| secrets::looks_like_key(k)).count();
                format!("{:.1}%", percent(found, keys.len()))
            })
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
    }
}

/// One server's launch spec, wherever it was read.
#[derive(Default)]
struct Spec {
    origin: String,
    name: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    url: Option<String>,
}

impl Spec {
    /// What the gateway registers for it (`ServerSpec::secret_values`), but `${VAR}`
    /// references: the gateway registers what they expand to, not the reference.
    fn secrets(&self) -> Vec<String> {
        let mut values = secrets::arg_secrets(&self.args);
        for (name, value) in self.env.iter().chain(&self.headers) {
            values.extend(secrets::setting_secrets(name, value));
        }
        if let Some(url) = self.url.as_deref().and_then(|u| reqwest::Url::parse(u).ok()) {
            values.extend(secrets::url_secrets(&url));
        }
        values.retain(|v| !v.contains("${"));
        values
    }
}

/// Every server of the committed configs: any object with a `command` or a `url`, in JSON,
/// JSON with comments or YAML.
fn committed_specs(root: &Path) -> Vec<Spec> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("tests/fixtures/configs"))
        .into_iter()
        .flatten()
        .filter_map(|e| Some(e.ok()?.path()))
        .collect();
    files.extend(
        std::fs::read_dir(root.join("examples"))
            .into_iter()
            .flatten()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.to_string_lossy().ends_with(".config.json")),
    );
    files.sort();
    let mut specs = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let is_yaml = file.extension().is_some_and(|e| e == "yaml" || e == "yml");
        let value: Option<Value> = if is_yaml {
            serde_norway::from_str(&text).ok()
        } else {
            jsonc_parser::parse_to_serde_value::<Value>(&text, &jsonc_parser::ParseOptions::default()).ok()
        };
        let origin = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if let Some(value) = value {
            collect_specs(&value, "", &origin, &mut specs);
        }
    }
    specs
}

fn collect_specs(value: &Value, key: &str, origin: &str, out: &mut Vec<Spec>) {
    let Some(object) = value.as_object() else {
        if let Some(items) = value.as_array() {
            for item in items {
                collect_specs(item, key, origin, out);
            }
        }
        return;
    };
    let strings = |field: &str| -> Vec<String> {
        object
            .get(field)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let pairs = |field: &str| -> Vec<(String, String)> {
        object
            .get(field)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let command = object.get("command").and_then(Value::as_str);
    let url = object.get("url").and_then(Value::as_str);
    if command.is_some() || url.is_some() {
        out.push(Spec {
            origin: origin.to_owned(),
            name: object.get("name").and_then(Value::as_str).unwrap_or(key).to_owned(),
            args: strings("args"),
            env: pairs("env"),
            headers: pairs("headers"),
            url: url.map(str::to_owned),
        });
    }
    for (child_key, child) in object {
        collect_specs(child, child_key, origin, out);
    }
}

fn catalog_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

fn server_of(line: &str) -> String {
    serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v.get("server")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The key-shape rule this one replaced: 16+ characters of a key's alphabet mixing letters
/// and digits (with both cases when it holds `/` or `.`), or a known prefix.
fn old_looks_like_key(value: &str) -> bool {
    let value = value.trim();
    let alphabet = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_+/=.~".contains(c));
    if !alphabet || value.starts_with(['/', '.', '~']) {
        return false;
    }
    if ["sk-", "ghp_", "github_pat_", "xoxb-", "AKIA"]
        .iter()
        .any(|p| value.starts_with(p) && value.len() >= p.len() + 8)
    {
        return true;
    }
    let has = |f: fn(&char) -> bool| value.chars().any(|c| f(&c));
    let mixed = has(char::is_ascii_alphabetic) && has(char::is_ascii_digit);
    let base64_like = !value.contains(['/', '.']) || (has(char::is_ascii_uppercase) && has(char::is_ascii_lowercase));
    value.len() >= 16 && mixed && base64_like
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// A fixed-seed generator, so every run draws the same keys.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn string(&mut self, alphabet: &str, len: usize) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        (0..len)
            .map(|_| chars[usize::try_from(self.next() % chars.len() as u64).unwrap_or(0)])
            .collect()
    }
}
