//! Exit statuses (seed 003 "CLI Commands"), and the one mapping from the engine's error codes
//! to them.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | invalid arguments (bad flags, bad `--args` JSON, arguments the tool's schema rejects) |
//! | 2 | configuration error; server or tool not found; `search` found nothing |
//! | 3 | a server could not be reached (did not start, failed, timed out starting), for every command that needs one (`tools`, `inspect`, `execute`, `trust`); or the tool failed: its server answered `isError`, returned an error or timed out |
//! | 4 | the tool is disabled by `toolRules` (or blocked by `security` until trusted) |
//! | 130 | interrupted (Ctrl-C); a running tool call is cancelled downstream |

use crate::error::ErrorCode;

pub const OK: i32 = 0;
pub const BAD_INPUT: i32 = 1;
/// The config could not be read or is invalid.
pub const CONFIGURATION: i32 = 2;
/// No such server or tool, or a search without results.
pub const NOT_FOUND: i32 = 2;
pub const EXECUTION_FAILED: i32 = 3;
/// The server a command needs could not be reached: a failure like a tool's, as the seed's
/// `execute` counts it, whichever command met it.
pub const UNREACHABLE: i32 = 3;
pub const DISABLED: i32 = 4;
/// 128 + SIGINT, as shells report a command ended by Ctrl-C.
pub const INTERRUPTED: i32 = 130;

/// The exit status for an engine error code.
#[must_use]
pub fn status_of(code: ErrorCode) -> i32 {
    match code {
        ErrorCode::ValidationError => BAD_INPUT,
        ErrorCode::ConfigurationError => CONFIGURATION,
        ErrorCode::ServerNotFound | ErrorCode::ToolNotFound => NOT_FOUND,
        ErrorCode::ToolDisabled | ErrorCode::ToolBlocked | ErrorCode::ToolNotConfirmed => DISABLED,
        ErrorCode::ToolExecutionError | ErrorCode::ToolExecutionTimeout | ErrorCode::RateLimited => EXECUTION_FAILED,
        ErrorCode::ServerConnectionError => UNREACHABLE,
    }
}
