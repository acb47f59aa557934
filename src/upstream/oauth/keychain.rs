//! The OS keychain as the token store's first choice: the Keychain on macOS, the Credential
//! Manager on Windows, the Secret Service (D-Bus, spoken in pure Rust: no C library) on Linux.
//!
//! A keychain can hang (a Secret Service nobody answers on a headless box) or wait for a
//! person (an unlock prompt), and a gateway started by an AI client must not stall on it. So,
//! as GitHub's `gh` does, every call runs on a thread of its own, off the async runtime, and is
//! given [`TIMEOUT`]; a call that errs or does not answer in time turns the keychain off for
//! the rest of the process, and the store keeps tokens in its owner-only file instead. That is
//! said once, on stderr. A hung call's thread is left behind: it holds no lock and does not
//! keep the process from exiting.
//!
//! `ANYGPT_DISCOVERY_TOKEN_STORE=file` keeps tokens in the file without asking the keychain.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// How long one keychain call may take before the store gives up on the keychain.
pub(super) const TIMEOUT: Duration = Duration::from_secs(3);

/// The environment variable that picks where tokens go: `auto` (the keychain where one
/// answers, else the file; the default) or `file`.
pub const STORE_ENV: &str = "ANYGPT_DISCOVERY_TOKEN_STORE";

/// The keychain items' service name; the account is the file the item stands for.
const SERVICE: &str = "anygpt-discovery";

/// What a keychain can do: a text per account.
pub(super) trait Vault: Send + Sync + 'static {
    /// The text kept for `account`, or `None`.
    fn get(&self, account: &str) -> Result<Option<String>, VaultError>;
    fn set(&self, account: &str, text: &str) -> Result<(), VaultError>;
    /// Forget `account`'s text; whether there was one.
    fn delete(&self, account: &str) -> Result<bool, VaultError>;
}

/// Why the keychain did not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum VaultError {
    #[error("{0}")]
    Refused(String),
    /// The item is larger than this keychain holds (Windows: 2560 bytes): this document stays
    /// in its file, the keychain in use for the others.
    #[error("{0}")]
    TooLong(String),
    #[error("it did not answer within {} s", .0.as_secs_f32())]
    Timeout(Duration),
    #[error("its call ended without an answer")]
    Lost,
}

/// The platform's keychain through the `keyring` crate.
struct OsKeychain;

impl OsKeychain {
    fn entry(account: &str) -> Result<keyring::Entry, VaultError> {
        keyring::Entry::new(SERVICE, account).map_err(|e| refused(&e))
    }
}

fn refused(error: &keyring::Error) -> VaultError {
    VaultError::Refused(error.to_string())
}

impl Vault for OsKeychain {
    fn get(&self, account: &str) -> Result<Option<String>, VaultError> {
        match Self::entry(account)?.get_password() {
            Ok(text) => Ok(Some(text)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(error) => Err(refused(&error)),
        }
    }

    fn set(&self, account: &str, text: &str) -> Result<(), VaultError> {
        match Self::entry(account)?.set_password(text) {
            Ok(()) => Ok(()),
            Err(error @ keyring::Error::TooLong(..)) => Err(VaultError::TooLong(error.to_string())),
            Err(error) => Err(refused(&error)),
        }
    }

    fn delete(&self, account: &str) -> Result<bool, VaultError> {
        match Self::entry(account)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(error) => Err(refused(&error)),
        }
    }
}

/// Whether the keychain is still asked in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    On,
    /// Chosen by `ANYGPT_DISCOVERY_TOKEN_STORE=file`.
    NotWanted,
    /// It failed or hung once; the reason, as said on stderr.
    Failed(String),
}

/// The keychain of this process (or of a test), with its on/off state.
pub(crate) struct Keychain {
    vault: Arc<dyn Vault>,
    timeout: Duration,
    state: Mutex<State>,
}

impl Keychain {
    pub(super) fn new(vault: Arc<dyn Vault>, timeout: Duration, wanted: bool) -> Self {
        Self {
            vault,
            timeout,
            state: Mutex::new(if wanted { State::On } else { State::NotWanted }),
        }
    }

    /// The process's keychain, on unless `ANYGPT_DISCOVERY_TOKEN_STORE=file`.
    pub(crate) fn process() -> &'static Self {
        static PROCESS: OnceLock<Keychain> = OnceLock::new();
        PROCESS.get_or_init(|| Self::new(Arc::new(OsKeychain), TIMEOUT, wanted_by_env()))
    }

    pub(super) fn is_on(&self) -> bool {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) == State::On
    }

    /// Why tokens are not in the keychain (for `auth status`), or `None` while it is used.
    pub(crate) fn why_off(&self) -> Option<String> {
        match &*self.state.lock().unwrap_or_else(PoisonError::into_inner) {
            State::On => None,
            State::NotWanted => Some(format!("{STORE_ENV}=file")),
            State::Failed(reason) => Some(reason.clone()),
        }
    }

    /// Why the keychain failed in this process, or `None` (it answers, or is not wanted).
    pub(super) fn failure(&self) -> Option<String> {
        match &*self.state.lock().unwrap_or_else(PoisonError::into_inner) {
            State::Failed(reason) => Some(reason.clone()),
            State::On | State::NotWanted => None,
        }
    }

    /// The text kept for `account`: `None` when the keychain is off or just failed (then the
    /// file holds the tokens), `Some(None)` when it answered that it has none.
    pub(super) async fn get(&self, account: &str, file: &std::path::Path) -> Option<Option<String>> {
        let account = account.to_owned();
        self.call(file, move |vault| vault.get(&account)).await
    }

    /// Keep `text` for `account`; whether the keychain took it (not when it is off, failed,
    /// or the text is too long for it).
    pub(super) async fn set(&self, account: &str, text: String, file: &std::path::Path) -> bool {
        let account = account.to_owned();
        self.call(file, move |vault| vault.set(&account, &text)).await.is_some()
    }

    /// Forget `account`'s text: `Some(whether there was one)`, or `None` when the keychain is
    /// off or failed.
    pub(super) async fn delete(&self, account: &str, file: &std::path::Path) -> Option<bool> {
        let account = account.to_owned();
        self.call(file, move |vault| vault.delete(&account)).await
    }

    /// [`Keychain::get`] for a caller that cannot await: a launch spec's `${secret:NAME}` is
    /// expanded synchronously. The same thread, timeout and turning off; `None` when the
    /// keychain has no such item, or is off or failed.
    pub(crate) fn get_blocking(&self, account: &str, file: &std::path::Path) -> Option<String> {
        let account = account.to_owned();
        self.call_blocking(file, move |vault| vault.get(&account)).flatten()
    }

    /// [`Keychain::set`], blocking.
    pub(crate) fn set_blocking(&self, account: &str, text: String, file: &std::path::Path) -> bool {
        let account = account.to_owned();
        self.call_blocking(file, move |vault| vault.set(&account, &text))
            .is_some()
    }

    /// [`Keychain::delete`], blocking.
    pub(crate) fn delete_blocking(&self, account: &str, file: &std::path::Path) -> Option<bool> {
        let account = account.to_owned();
        self.call_blocking(file, move |vault| vault.delete(&account))
    }

    /// Run `op` on the vault on a thread of its own (a keychain may block for as long as it
    /// likes: a locked Secret Service waits for a password prompt); `deliver` hands its
    /// outcome to whoever waits, for as long as they wait.
    fn spawn_op<T: Send + 'static>(
        &self,
        op: impl FnOnce(&dyn Vault) -> Result<T, VaultError> + Send + 'static,
        deliver: impl FnOnce(Result<T, VaultError>) + Send + 'static,
    ) -> Result<(), VaultError> {
        let vault = self.vault.clone();
        std::thread::Builder::new()
            .name("anygpt-keychain".into())
            .spawn(move || deliver(op(vault.as_ref())))
            .map(drop)
            .map_err(|error| VaultError::Refused(format!("cannot start its thread: {error}")))
    }

    /// [`Keychain::call`] for code that cannot await: the same thread, the same timeout.
    fn call_blocking<T: Send + 'static>(
        &self,
        file: &std::path::Path,
        op: impl FnOnce(&dyn Vault) -> Result<T, VaultError> + Send + 'static,
    ) -> Option<T> {
        if !self.is_on() {
            return None;
        }
        let (answer, answered) = std::sync::mpsc::channel();
        let outcome = self
            .spawn_op(op, move |outcome| {
                let _ = answer.send(outcome);
            })
            .and_then(|()| match answered.recv_timeout(self.timeout) {
                Ok(outcome) => outcome,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(VaultError::Lost),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(VaultError::Timeout(self.timeout)),
            });
        self.settle(outcome, file)
    }

    /// Run `op` on a thread of its own within the timeout; on an error or no answer, turn the
    /// keychain off for this process and say so once (naming `file`, where tokens go instead).
    async fn call<T: Send + 'static>(
        &self,
        file: &std::path::Path,
        op: impl FnOnce(&dyn Vault) -> Result<T, VaultError> + Send + 'static,
    ) -> Option<T> {
        if !self.is_on() {
            return None;
        }
        let (answer, answered) = tokio::sync::oneshot::channel();
        let spawned = self.spawn_op(op, move |outcome| {
            let _ = answer.send(outcome);
        });
        let outcome = match spawned {
            Ok(()) => match tokio::time::timeout(self.timeout, answered).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => Err(VaultError::Lost),
                Err(_) => Err(VaultError::Timeout(self.timeout)),
            },
            Err(refused) => Err(refused),
        };
        self.settle(outcome, file)
    }

    /// A call's value, or `None` after turning the keychain off for an error (a document too
    /// long for it only stays in its file).
    fn settle<T>(&self, outcome: Result<T, VaultError>, file: &std::path::Path) -> Option<T> {
        match outcome {
            Ok(value) => Some(value),
            Err(VaultError::TooLong(why)) => {
                tracing::info!(file = %file.display(), "kept in the file, not the OS keychain: {why}");
                None
            }
            Err(error) => {
                self.turn_off(&error, file);
                None
            }
        }
    }

    fn turn_off(&self, error: &VaultError, file: &std::path::Path) {
        let reason = crate::secrets::scrub(&format!("the OS keychain failed: {error}")).into_owned();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if *state != State::On {
            return;
        }
        *state = State::Failed(reason.clone());
        drop(state);
        let dir = file.parent().unwrap_or(file);
        tracing::warn!(
            "sign-in tokens go to owner-only files in {} for this run: {reason} (set {STORE_ENV}=file to skip the keychain)",
            dir.display()
        );
    }
}

/// Whether `ANYGPT_DISCOVERY_TOKEN_STORE` lets the keychain be asked; an unknown value is
/// warned about and read as the default.
fn wanted_by_env() -> bool {
    match std::env::var(STORE_ENV).ok().as_deref().map(str::trim) {
        None | Some("" | "auto" | "keychain") => true,
        Some("file") => false,
        Some(other) => {
            tracing::warn!(
                "{STORE_ENV}={} is not a token store; use `auto` (the OS keychain, else a file) or `file`",
                crate::secrets::scrub(other)
            );
            true
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A keychain in memory that can be told to fail or to hang.
    #[derive(Default)]
    pub(crate) struct FakeVault {
        pub items: Mutex<HashMap<String, String>>,
        pub fail: std::sync::atomic::AtomicBool,
        pub hang: std::sync::atomic::AtomicBool,
    }

    impl FakeVault {
        fn check(&self) -> Result<(), VaultError> {
            if self.hang.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(30));
            }
            if self.fail.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(VaultError::Refused("no Secret Service on the session bus".into()));
            }
            Ok(())
        }

        pub(crate) fn item(&self, account: &str) -> Option<String> {
            self.items.lock().unwrap().get(account).cloned()
        }
    }

    impl Vault for FakeVault {
        fn get(&self, account: &str) -> Result<Option<String>, VaultError> {
            self.check()?;
            Ok(self.item(account))
        }

        fn set(&self, account: &str, text: &str) -> Result<(), VaultError> {
            self.check()?;
            self.items.lock().unwrap().insert(account.to_owned(), text.to_owned());
            Ok(())
        }

        fn delete(&self, account: &str) -> Result<bool, VaultError> {
            self.check()?;
            Ok(self.items.lock().unwrap().remove(account).is_some())
        }
    }

    #[tokio::test]
    async fn a_hung_keychain_is_given_up_on_within_the_timeout_and_stays_off() {
        let vault = Arc::new(FakeVault::default());
        vault.hang.store(true, std::sync::atomic::Ordering::Relaxed);
        let keychain = Keychain::new(vault, Duration::from_millis(200), true);
        let file = std::path::Path::new("/tmp/x/oauth/a.json");
        let started = std::time::Instant::now();
        assert_eq!(keychain.get("a", file).await, None);
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert!(!keychain.is_on());
        assert!(keychain.why_off().unwrap().contains("did not answer within 0.2 s"));
        // Off: no second wait.
        let started = std::time::Instant::now();
        assert!(!keychain.set("a", "x".into(), file).await);
        assert!(started.elapsed() < Duration::from_millis(100));
    }

    #[test]
    fn the_blocking_calls_keep_values_and_give_up_on_a_hung_keychain() {
        let vault = Arc::new(FakeVault::default());
        let keychain = Keychain::new(vault.clone(), Duration::from_millis(200), true);
        let file = std::path::Path::new("/tmp/x/secrets/a.json");
        assert!(keychain.set_blocking("secret:A", "v1".into(), file));
        assert_eq!(keychain.get_blocking("secret:A", file).as_deref(), Some("v1"));
        assert_eq!(keychain.delete_blocking("secret:A", file), Some(true));
        assert_eq!(keychain.get_blocking("secret:A", file), None);
        vault.hang.store(true, std::sync::atomic::Ordering::Relaxed);
        let started = std::time::Instant::now();
        assert_eq!(keychain.get_blocking("secret:A", file), None);
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert!(!keychain.is_on());
    }

    #[tokio::test]
    async fn a_failing_keychain_turns_off_and_says_why() {
        let vault = Arc::new(FakeVault::default());
        vault.fail.store(true, std::sync::atomic::Ordering::Relaxed);
        let keychain = Keychain::new(vault, TIMEOUT, true);
        assert_eq!(keychain.delete("a", std::path::Path::new("a.json")).await, None);
        assert_eq!(
            keychain.why_off().as_deref(),
            Some("the OS keychain failed: no Secret Service on the session bus")
        );
    }

    /// Windows' Credential Manager holds 2560 bytes an item.
    struct SmallVault;

    impl Vault for SmallVault {
        fn get(&self, _: &str) -> Result<Option<String>, VaultError> {
            Ok(None)
        }

        fn set(&self, _: &str, _: &str) -> Result<(), VaultError> {
            Err(VaultError::TooLong("password is longer than 2560 bytes".into()))
        }

        fn delete(&self, _: &str) -> Result<bool, VaultError> {
            Ok(false)
        }
    }

    #[tokio::test]
    async fn an_item_too_long_for_the_keychain_leaves_it_in_use() {
        let keychain = Keychain::new(Arc::new(SmallVault), TIMEOUT, true);
        let file = std::path::Path::new("a.json");
        assert!(!keychain.set("a", "x".repeat(3000), file).await);
        assert!(keychain.is_on());
        assert_eq!(keychain.get("b", file).await, Some(None));
    }

    #[tokio::test]
    async fn a_keychain_not_wanted_is_never_asked() {
        let vault = Arc::new(FakeVault::default());
        vault.hang.store(true, std::sync::atomic::Ordering::Relaxed);
        let keychain = Keychain::new(vault, TIMEOUT, false);
        let started = std::time::Instant::now();
        assert_eq!(keychain.get("a", std::path::Path::new("a.json")).await, None);
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(keychain.why_off().as_deref(), Some("ANYGPT_DISCOVERY_TOKEN_STORE=file"));
    }
}
