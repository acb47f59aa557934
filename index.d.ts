// Types of @anygpt/discovery. The engine's types are generated from the Rust bindings into
// binding.d.ts; this file re-exports them and adds the error shape index.js guarantees.
import type { ErrorCode } from './binding'

export * from './binding'

/** Every error the engine throws or rejects with carries a stable `code`. */
export interface DiscoveryError extends Error {
  code: ErrorCode
}
