//! The search order: which config file wins, decided here and only here.
//!
//! Every face asks [`locate`]: the native CLI, the npm bin and the Node API (through the
//! `locateConfig` binding), so a TS file and a YAML file at the same level are never chosen
//! differently by two faces. Order (DESIGN §3): `--config`, `ANYGPT_DISCOVERY_CONFIG`,
//! `./.anygpt/mcp-discovery.config.*`, `./anygpt.config.*` (its `discovery` section), the same
//! two under the home directory, else zero-config. Extensions in [`EXTENSIONS`] order.

use std::path::{Path, PathBuf};

use crate::consent::{self, Place, Scope, Skipped, Verdict};

/// Names a config file, like `--config`.
pub const CONFIG_ENV: &str = "ANYGPT_DISCOVERY_CONFIG";

/// Extensions tried at each level, first found wins.
pub const EXTENSIONS: [&str; 10] = ["ts", "mts", "cts", "js", "mjs", "cjs", "json", "jsonc", "yaml", "yml"];

/// Extensions only the JS side can evaluate.
const JS_EXTENSIONS: [&str; 6] = ["ts", "mts", "cts", "js", "mjs", "cjs"];

/// Base name (before the extension) of the gateway's own config file.
const OWN_FILE: &str = "mcp-discovery.config";
/// Base name of the `AnyGPT` config, whose `discovery` section is read.
const ANYGPT_FILE: &str = "anygpt.config";

/// The machine as the search sees it: injectable so tests use a temporary HOME and project.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// The project folder (`./…` in the search order; `${workspaceFolder}`).
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
    /// The per-user config folder of this OS: `$XDG_CONFIG_HOME` or `~/.config` on Linux,
    /// `~/Library/Application Support` on macOS, `%APPDATA%` on Windows.
    pub config_dir: Option<PathBuf>,
    /// The value of `ANYGPT_DISCOVERY_CONFIG`.
    pub config_env: Option<PathBuf>,
    /// The state folder, where approvals of project configs are kept (`crate::consent`).
    pub state_dir: Option<PathBuf>,
}

impl Environment {
    /// This process's view.
    #[must_use]
    pub fn current() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = var("HOME").or_else(|| var("USERPROFILE")).or_else(dirs::home_dir);
        let config_dir = if cfg!(windows) {
            var("APPDATA").or_else(dirs::config_dir)
        } else if cfg!(target_os = "macos") {
            home.as_ref().map(|h| h.join("Library").join("Application Support"))
        } else {
            var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")))
        };
        Self {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            home,
            config_dir,
            config_env: var(CONFIG_ENV),
            state_dir: crate::paths::state_dir(),
        }
    }
}

/// Why a file was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chosen {
    /// Named by `--config`.
    Flag,
    /// Named by `ANYGPT_DISCOVERY_CONFIG`.
    EnvVar,
    /// Found by the search.
    Search,
}

/// The answer of [`locate`].
#[derive(Debug, Clone)]
pub struct Located {
    /// The winning file, or `None` for zero-config.
    pub file: Option<PathBuf>,
    pub chosen: Option<Chosen>,
    /// Every place looked, in order, as a short pattern (`./.anygpt/mcp-discovery.config.{ts,…}`).
    pub looked: Vec<String>,
    /// The winner's scope: a project file (approved) or the user's own.
    pub scope: Scope,
    /// The winner's approval, when it is a project file: the place and its content hash.
    pub approved: Option<(Place, String)>,
    /// Project configs passed over for want of approval (an unapproved one never wins).
    pub skipped: Vec<Skipped>,
    /// Config files later in the order that exist but lost to the winner.
    pub shadowed: Vec<PathBuf>,
}

impl Located {
    /// Whether the winner must be evaluated by the JS side.
    #[must_use]
    pub fn needs_js(&self) -> bool {
        self.file.as_deref().is_some_and(is_js_config)
    }
}

/// Whether `path` is a TS/JS config (evaluated on the JS side, never in Rust).
#[must_use]
pub fn is_js_config(path: &Path) -> bool {
    extension(path).is_some_and(|e| JS_EXTENSIONS.contains(&e.as_str()))
}

/// Whether `path` is an `anygpt.config.*`, of which only the `discovery` section is ours.
#[must_use]
pub fn is_anygpt_config(path: &Path) -> bool {
    path.file_stem().and_then(|s| s.to_str()) == Some(ANYGPT_FILE)
}

pub(super) fn extension(path: &Path) -> Option<String> {
    path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase)
}

/// Decide which config file wins. `flag` is `--config`. A named file wins even if it does not
/// exist (reading it then fails with a clear error); the search takes only existing files.
/// A file found under the starting folder is project-scoped: it wins only when approved
/// (`crate::consent`); unapproved, it is passed over (and reported) and the search goes on.
#[must_use]
pub fn locate(flag: Option<&Path>, env: &Environment) -> Located {
    let mut located = Located {
        file: None,
        chosen: None,
        looked: vec!["--config".to_owned()],
        scope: Scope::User,
        approved: None,
        skipped: Vec::new(),
        shadowed: Vec::new(),
    };
    if let Some(file) = flag {
        located.file = Some(env.cwd.join(file));
        located.chosen = Some(Chosen::Flag);
        return located;
    }
    located.looked.push(format!("${CONFIG_ENV}"));
    if let Some(file) = &env.config_env {
        located.file = Some(env.cwd.join(file));
        located.chosen = Some(Chosen::EnvVar);
        return located;
    }
    let project = consent::cwd_is_project(env);
    let roots = [Some((".", env.cwd.clone())), env.home.clone().map(|h| ("~", h))];
    for (shown, root) in roots.into_iter().flatten() {
        let scope = if shown == "." && project {
            Scope::Project
        } else {
            Scope::User
        };
        for (folder, base) in [(Some(".anygpt"), OWN_FILE), (None, ANYGPT_FILE)] {
            let dir = folder.map_or_else(|| root.clone(), |f| root.join(f));
            let shown_dir = folder.map_or_else(|| shown.to_owned(), |f| format!("{shown}/{f}"));
            if located.file.is_none() {
                located
                    .looked
                    .push(format!("{shown_dir}/{base}.{{{}}}", EXTENSIONS.join(",")));
            }
            let Some(file) = EXTENSIONS
                .iter()
                .map(|ext| dir.join(format!("{base}.{ext}")))
                .find(|p| p.is_file())
            else {
                continue;
            };
            if located.file.is_some() {
                if !located.shadowed.contains(&file) && located.file.as_ref() != Some(&file) {
                    located.shadowed.push(file);
                }
                continue;
            }
            if scope == Scope::Project {
                let place = Place::file(&file);
                match consent::verdict(&place, env) {
                    Verdict::Approved(hash) => located.approved = Some((place, hash)),
                    Verdict::Skipped(why) => {
                        located.skipped.push(Skipped::new(place, why));
                        continue;
                    }
                }
            }
            located.file = Some(file);
            located.chosen = Some(Chosen::Search);
            located.scope = scope;
        }
    }
    located
}

/// The project config files under the starting folder that exist, in search order (the first
/// of each level): what `allow` without a file approves, with the clients' project files.
#[must_use]
pub fn project_config_files(env: &Environment) -> Vec<PathBuf> {
    if !consent::cwd_is_project(env) {
        return Vec::new();
    }
    [(Some(".anygpt"), OWN_FILE), (None, ANYGPT_FILE)]
        .into_iter()
        .filter_map(|(folder, base)| {
            let dir = folder.map_or_else(|| env.cwd.clone(), |f| env.cwd.join(f));
            EXTENSIONS
                .iter()
                .map(|ext| dir.join(format!("{base}.{ext}")))
                .find(|p| p.is_file())
        })
        .collect()
}

/// A temporary machine for tests: an empty project folder (the working directory) and an
/// empty home, no config variable.
#[cfg(test)]
pub(crate) struct TestMachine {
    _dir: tempfile::TempDir,
    pub env: Environment,
}

#[cfg(test)]
impl TestMachine {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("project");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Self {
            env: Environment {
                cwd,
                home: Some(home.clone()),
                config_dir: Some(home.join(".config")),
                config_env: None,
                state_dir: Some(dir.path().join("state")),
            },
            _dir: dir,
        }
    }

    /// Approve `file` as `anygpt-discovery allow` would.
    pub fn allow(&self, file: &Path) {
        crate::consent::Approvals::load(&self.env)
            .record(&crate::consent::Place::file(file), crate::consent::Decision::Allow)
            .unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> TestMachine {
        TestMachine::new()
    }

    fn touch(path: &Path) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "{}").unwrap();
        path.to_path_buf()
    }

    #[test]
    fn nothing_found_is_zero_config_and_names_every_place() {
        let m = machine();
        let located = locate(None, &m.env);
        assert_eq!(located.file, None);
        assert_eq!(
            located.looked,
            [
                "--config",
                "$ANYGPT_DISCOVERY_CONFIG",
                "./.anygpt/mcp-discovery.config.{ts,mts,cts,js,mjs,cjs,json,jsonc,yaml,yml}",
                "./anygpt.config.{ts,mts,cts,js,mjs,cjs,json,jsonc,yaml,yml}",
                "~/.anygpt/mcp-discovery.config.{ts,mts,cts,js,mjs,cjs,json,jsonc,yaml,yml}",
                "~/anygpt.config.{ts,mts,cts,js,mjs,cjs,json,jsonc,yaml,yml}",
            ]
        );
    }

    #[test]
    fn each_level_wins_over_the_ones_after_it() {
        let mut m = machine();
        let home_anygpt = touch(&m.env.home.clone().unwrap().join("anygpt.config.yaml"));
        assert_eq!(locate(None, &m.env).file.as_ref(), Some(&home_anygpt));
        let home_own = touch(&m.env.home.clone().unwrap().join(".anygpt/mcp-discovery.config.json"));
        assert_eq!(locate(None, &m.env).file.as_ref(), Some(&home_own));
        // A project file wins only once approved; until then the user's own is used.
        let project_anygpt = touch(&m.env.cwd.join("anygpt.config.ts"));
        let located = locate(None, &m.env);
        assert_eq!(located.file.as_ref(), Some(&home_own));
        assert_eq!(located.skipped[0].place.file, project_anygpt);
        m.allow(&project_anygpt);
        let located = locate(None, &m.env);
        assert_eq!(located.file.as_ref(), Some(&project_anygpt));
        assert_eq!(located.scope, Scope::Project);
        assert_eq!(located.shadowed, [home_own.clone(), home_anygpt.clone()]);
        assert!(located.needs_js());
        let project_own = touch(&m.env.cwd.join(".anygpt/mcp-discovery.config.yml"));
        m.allow(&project_own);
        assert_eq!(locate(None, &m.env).file.as_ref(), Some(&project_own));
        let by_env = touch(&m.env.cwd.join("env.json"));
        m.env.config_env = Some("env.json".into());
        let located = locate(None, &m.env);
        assert_eq!(
            (located.file.as_ref(), located.chosen),
            (Some(&by_env), Some(Chosen::EnvVar))
        );
        let located = locate(Some(Path::new("other.yaml")), &m.env);
        assert_eq!(located.file, Some(m.env.cwd.join("other.yaml")));
        assert_eq!(located.chosen, Some(Chosen::Flag));
    }

    #[test]
    fn extensions_are_tried_in_order() {
        let m = machine();
        let dir = m.env.cwd.join(".anygpt");
        touch(&dir.join("mcp-discovery.config.yml"));
        touch(&dir.join("mcp-discovery.config.jsonc"));
        let mts = touch(&dir.join("mcp-discovery.config.mts"));
        m.allow(&mts);
        assert_eq!(locate(None, &m.env).file, Some(mts));
    }

    #[test]
    fn kinds_of_files() {
        assert!(is_js_config(Path::new("a/anygpt.config.CTS")));
        assert!(!is_js_config(Path::new("a.jsonc")));
        assert!(is_anygpt_config(Path::new("/x/anygpt.config.json")));
        assert!(!is_anygpt_config(Path::new("/x/mcp-discovery.config.json")));
    }
}
